import { connect, type Socket } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type ConnectorsWorld, type Member, member, startWorld } from '../connectors/support.js';

/**
 * Nothing a client does with its own connection ends anything but its own request: hanging up
 * while the body is on its way, while the broker waits on Composio or Postgres, or while the
 * answer streams; an upstream that breaks off mid-answer; a client that stops reading. The
 * process keeps serving, and no error escapes to the process (`uncaughtException`,
 * `unhandledRejection`), which would make close-with-grace stop the broker in production.
 */

let w: ConnectorsWorld;
let a: Member;
let origin: string;
let port: number;
const escaped: unknown[] = [];
const onEscape = (error: unknown) => escaped.push(error);

beforeAll(async () => {
  process.on('uncaughtException', onEscape);
  process.on('unhandledRejection', onEscape);
  w = await startWorld();
  a = await member(w.t.app);
  origin = await w.t.app.listen({ port: 0, host: '127.0.0.1' });
  port = Number(new URL(origin).port);
});
afterAll(async () => {
  process.off('uncaughtException', onEscape);
  process.off('unhandledRejection', onEscape);
  await w.close();
});
afterEach(() => {
  w.h.sim.controls.setMcpStreaming(null);
  w.h.sim.controls.clearFaults();
});

const rpc = (id: number, method: string, params: unknown = {}) => JSON.stringify({ jsonrpc: '2.0', id, method, params });

/** A raw HTTP/1.1 request on its own socket, so a test decides exactly when to hang up. */
function open(): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => resolve(socket));
    socket.once('error', reject);
  });
}

function head(method: string, path: string, headers: Record<string, string>, bodyLength?: number): string {
  const lines = [`${method} ${path} HTTP/1.1`, 'host: 127.0.0.1', ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`)];
  if (bodyLength !== undefined) lines.push(`content-length: ${bodyLength}`);
  return `${lines.join('\r\n')}\r\n\r\n`;
}

/** Resolves with what arrived once at least `bytes` of the answer (headers included) are in. */
function received(socket: Socket, bytes = 1): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    const onData = (chunk: Buffer) => {
      text += chunk.toString('utf8');
      if (text.length >= bytes) {
        socket.off('data', onData);
        resolve(text);
      }
    };
    socket.on('data', onData);
    socket.once('error', reject);
    socket.once('close', () => resolve(text));
  });
}

/** The broker still answers, over a fresh connection, and nothing escaped to the process. */
async function stillServing(): Promise<void> {
  const health = await fetch(`${origin}/health`);
  expect(health.status).toBe(200);
  const me = await fetch(`${origin}/v1/me`, { headers: a.auth });
  expect(me.status).toBe(200);
  expect(escaped).toEqual([]);
}

async function mcpSessionId(m: Member): Promise<string> {
  const init = await fetch(`${origin}/v1/mcp`, {
    method: 'POST',
    headers: { ...m.auth, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: rpc(0, 'initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'test', version: '1' } }),
  });
  await init.body?.cancel();
  return init.headers.get('mcp-session-id')!;
}

describe('a client hanging up on /v1/mcp ends only its own request', () => {
  for (const accept of ['text/event-stream', 'application/json']) {
    it(`mid-answer (${accept})`, async () => {
      const sessionId = await mcpSessionId(a);
      w.h.sim.controls.setMcpStreaming({ chunks: 5, intervalMs: 300, times: 1 });
      const socket = await open();
      const body = rpc(1, 'tools/list');
      socket.write(
        head(
          'POST',
          '/v1/mcp',
          { ...a.auth, 'content-type': 'application/json', accept, 'mcp-session-id': sessionId },
          Buffer.byteLength(body),
        ) + body,
      );
      const first = await received(socket);
      expect(first).toMatch(/^HTTP\/1.1 200/);
      socket.destroy();
      // The simulator keeps pacing its answer for a while: the broker sees the rest fail.
      await delay(1_000);
      await stillServing();
    });
  }
});
