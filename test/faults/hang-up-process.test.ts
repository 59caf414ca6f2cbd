import { connect } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type BrokerProcess, startBroker } from '../support/broker-process.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { type Registered, registerOver } from '../support/http.js';

/**
 * The hang-up of issue 13 as a desktop app does it, against a broker process started as
 * `npm start` starts it (sandbox mode, close-with-grace installed): a client closing while a
 * slow `/v1/mcp` answer streams must leave that process running and serving.
 */

let database: TestDatabase;
let broker: BrokerProcess;
let simulator: string;
let who: Registered;
let mcpSessionId: string;

beforeAll(async () => {
  database = await createTestDatabase();
  broker = await startBroker({ DATABASE_URL: database.url });
  simulator = /"simulator":"(http:\/\/[^"]+)"/.exec(broker.output())![1]!;
  who = await registerOver(broker.url);
  const init = await fetch(`${broker.url}/v1/mcp`, {
    method: 'POST',
    headers: { ...who.auth, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: {} }),
  });
  await init.body?.cancel();
  mcpSessionId = init.headers.get('mcp-session-id')!;
}, 60_000);
afterAll(async () => {
  await broker?.stop();
  await database?.drop();
});

describe('a spawned broker', () => {
  it('keeps serving after clients hang up mid-answer on /v1/mcp (SSE and JSON)', async () => {
    const armed = await fetch(`${simulator}/_sim/mcp/streaming`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify({ chunks: 8, intervalMs: 250, times: 1 }),
    });
    expect(armed.ok).toBe(true);
    const port = Number(new URL(broker.url).port);
    for (const as of ['sse', 'json']) {
      // The strict MCP server answers as the control says; every client accepts both.
      const accept = 'application/json, text/event-stream';
      if (as === 'json') {
        const again = await fetch(`${simulator}/_sim/mcp/streaming`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', accept: 'application/json' },
          body: JSON.stringify({ chunks: 8, intervalMs: 250, times: 1, as }),
        });
        expect(again.ok).toBe(true);
      }
      const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} });
      const socket = connect(port, '127.0.0.1');
      await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
      socket.on('error', () => {});
      socket.write(
        `POST /v1/mcp HTTP/1.1\r\nhost: x\r\nauthorization: ${who.auth.authorization}\r\ncontent-type: application/json\r\naccept: ${accept}\r\nmcp-session-id: ${mcpSessionId}\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      );
      await delay(600);
      socket.destroy();
    }
    // Past the rest of both answers, which now fail inside the broker.
    await delay(2_500);
    expect(broker.child.exitCode).toBeNull();
    expect((await fetch(`${broker.url}/health`)).status).toBe(200);
    expect((await fetch(`${broker.url}/v1/me`, { headers: who.auth })).status).toBe(200);
    expect(broker.output()).not.toMatch(/shutting down after an error|uncaught|unexpected error/i);
  });
});
