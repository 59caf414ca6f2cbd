import { connect, type Socket } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { connectAccount } from '../composio/harness.js';
import { type ConnectorsWorld, type Member, member, startWorld } from '../connectors/support.js';
import { until } from '../support/http.js';

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
let logsBefore = 0;
beforeEach(() => {
  escaped.length = 0;
  logsBefore = w.t.logs.lines.length;
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
  // A hang-up is the client's choice, not the broker failing.
  expect(w.t.logs.lines.slice(logsBefore).join('\n')).not.toMatch(/unexpected error/);
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

/**
 * Until Composio's side of every MCP request sent since `since` (epoch ms) is over: answered in
 * full, or given up by the broker. Whatever the broker does with an upstream answer nobody waits
 * for has then happened; a moment more lets its last reactions (a log line, an error) surface.
 */
async function upstreamOver(since: number): Promise<void> {
  const mcp = () => w.h.sim.controls.requests().filter((r) => r.path.endsWith('/mcp') && r.method === 'POST' && r.at >= since);
  await until(() => mcp().length > 0 && mcp().every((r) => r.abandoned || r.status !== null), 10_000, "Composio's MCP answers over");
  await delay(100);
}

/** What every MCP client must accept; which of the two the answer is, the server decides. */
const BOTH = 'application/json, text/event-stream';

function mcpRequest(sessionId: string, id: number): string {
  const body = rpc(id, 'tools/list');
  const headers = { ...a.auth, 'content-type': 'application/json', accept: BOTH, 'mcp-session-id': sessionId };
  return head('POST', '/v1/mcp', headers, Buffer.byteLength(body)) + body;
}

describe('a client hanging up on /v1/mcp ends only its own request', () => {
  for (const as of ['sse', 'json'] as const) {
    it(`hangs up mid-answer (${as})`, async () => {
      const sessionId = await mcpSessionId(a);
      w.h.sim.controls.setMcpStreaming({ chunks: 5, intervalMs: 300, times: 1, as });
      const since = Date.now();
      const socket = await open();
      socket.write(mcpRequest(sessionId, 1));
      // The simulator is still pacing its answer (1.2 s in all) when the client goes.
      await delay(500);
      socket.destroy();
      await upstreamOver(since);
      await stillServing();
    });

    it(`hangs up before the answer's headers (${as})`, async () => {
      const sessionId = await mcpSessionId(a);
      w.h.sim.controls.injectFault({ delayMs: 800, path: '/tool_router/', times: 1, ...(as === 'json' ? { answerAs: as } : {}) });
      const since = Date.now();
      const socket = await open();
      socket.write(mcpRequest(sessionId, 2));
      await delay(300);
      socket.destroy();
      await upstreamOver(since);
      await stillServing();
    });

    it(`survives Composio breaking off mid-answer (${as})`, async () => {
      const sessionId = await mcpSessionId(a);
      w.h.sim.controls.setMcpStreaming({ chunks: 5, intervalMs: 100, times: 1, breakAfter: 2, as });
      const response = await fetch(`${origin}/v1/mcp`, {
        method: 'POST',
        headers: { ...a.auth, 'content-type': 'application/json', accept: BOTH, 'mcp-session-id': sessionId },
        body: rpc(3, 'tools/list'),
      });
      if (as === 'json') {
        // Nothing had gone out yet (a JSON answer is read whole): the whole answer is Composio failing.
        expect(response.status).toBe(502);
        expect(await response.json()).toEqual({ error: expect.stringMatching(/broke off/), code: 'upstream_unavailable' });
      } else {
        // The first events went out as they came; then the answer is cut off, as upstream's was.
        expect(response.status).toBe(200);
        await expect(response.text()).rejects.toThrow();
      }
      await stillServing();
    });
  }

  it('logs a request whose client hung up mid-answer: status 499, clientClosed', async () => {
    const sessionId = await mcpSessionId(a);
    w.h.sim.controls.setMcpStreaming({ chunks: 5, intervalMs: 300, times: 1 });
    const since = Date.now();
    const mcp = await open();
    mcp.write(mcpRequest(sessionId, 5));
    await received(mcp);
    const poll = await open();
    poll.write(head('GET', '/v1/events?wait=20', a.auth));
    await delay(500);
    mcp.destroy();
    poll.destroy();
    const closedLines = () =>
      w.t.logs.lines
        .slice(logsBefore)
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .filter((l) => l.msg === 'request' && l.clientClosed === true);
    await until(() => closedLines().length >= 2, 5_000, 'both hang-ups logged');
    const lines = closedLines();
    expect(lines).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ method: 'POST', url: '/v1/mcp', status: 499, installationId: a.installationId, ip: '127.0.0.1' }),
        expect.objectContaining({ method: 'GET', url: '/v1/events', status: 499, installationId: a.installationId, ip: '127.0.0.1' }),
      ]),
    );
    // One line per request: the line written at the hang-up is the only one, also once Composio's
    // answer is over.
    await upstreamOver(since);
    const mcpLines = w.t.logs.lines.slice(logsBefore).filter((l) => l.includes('"url":"/v1/mcp"') && l.includes('"msg":"request"'));
    expect(mcpLines.filter((l) => l.includes('"status":499'))).toHaveLength(1);
    await stillServing();
  });

  it('logs an answer Composio broke off mid-stream as cut off, not as the client closing', async () => {
    const sessionId = await mcpSessionId(a);
    w.h.sim.controls.setMcpStreaming({ chunks: 5, intervalMs: 100, times: 1, breakAfter: 2 });
    const response = await fetch(`${origin}/v1/mcp`, {
      method: 'POST',
      headers: { ...a.auth, 'content-type': 'application/json', accept: BOTH, 'mcp-session-id': sessionId },
      body: rpc(6, 'tools/list'),
    });
    await expect(response.text()).rejects.toThrow();
    await delay(200);
    const lines = w.t.logs.lines
      .slice(logsBefore)
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.msg === 'request' && l.url === '/v1/mcp' && l.status !== 200);
    expect(lines).toEqual([]);
    const cut = w.t.logs.lines
      .slice(logsBefore)
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.msg === 'request' && l.cutOff === true);
    expect(cut).toEqual([expect.objectContaining({ method: 'POST', url: '/v1/mcp', status: 200 })]);
    expect(cut[0]).not.toHaveProperty('clientClosed');
    await stillServing();
  });

  it('serves others while a client stops reading a long answer, then lets it go', async () => {
    const sessionId = await mcpSessionId(a);
    // 3 s of answer: the client stops reading at once and goes while it still streams.
    w.h.sim.controls.setMcpStreaming({ chunks: 50, intervalMs: 60, times: 1 });
    const since = Date.now();
    const socket = await open();
    socket.write(mcpRequest(sessionId, 4));
    await received(socket);
    socket.pause();
    await delay(1_000);
    await stillServing();
    socket.destroy();
    await upstreamOver(since);
    await stillServing();
  });
});

/**
 * Every route that waits on something (the body, Composio, Postgres, a long poll) or streams,
 * hung up on at each stage: while the body is still arriving, while the broker waits (Composio
 * held back by the simulator), and, where the answer streams, while it streams.
 */
describe('a client hanging up on any route ends only its own request', () => {
  let triggerId: string;
  beforeAll(async () => {
    const { accountId } = await connectAccount(w.h, a.userId, 'gmail', 'hangup');
    const created = await fetch(`${origin}/v1/triggers`, {
      method: 'POST',
      headers: { ...a.auth, 'content-type': 'application/json' },
      body: JSON.stringify({
        automationId: 'auto_hang',
        toolkit: 'gmail',
        triggerSlug: 'GMAIL_NEW_GMAIL_MESSAGE',
        connectedAccountId: accountId,
      }),
    });
    expect(created.status).toBe(201);
    triggerId = ((await created.json()) as { id: string }).id;
  });

  const json = { 'content-type': 'application/json' };
  const routes = (): { method: string; path: string; headers?: Record<string, string>; body?: string }[] => [
    { method: 'POST', path: '/v1/installations', headers: json, body: '{}' },
    { method: 'GET', path: '/v1/me', headers: a.auth },
    { method: 'PUT', path: '/v1/me/grant', headers: { ...a.auth, ...json }, body: JSON.stringify({ grant: 'x'.repeat(200) }) },
    { method: 'GET', path: '/v1/events?wait=2', headers: a.auth },
    { method: 'POST', path: '/v1/events/ack', headers: { ...a.auth, ...json }, body: JSON.stringify({ cursor: 'x' }) },
    { method: 'POST', path: '/v1/webhooks/composio', headers: json, body: JSON.stringify({ type: 'x', data: { pad: 'y'.repeat(4000) } }) },
    { method: 'GET', path: '/v1/connectors/connected', headers: a.auth },
    { method: 'GET', path: '/v1/connectors?services=gmail,slack', headers: a.auth },
    { method: 'POST', path: '/v1/connectors/slack/authorize', headers: { ...a.auth, ...json }, body: JSON.stringify({ alias: 'later' }) },
    { method: 'DELETE', path: '/v1/connectors/notion', headers: a.auth },
    { method: 'GET', path: '/v1/catalog', headers: a.auth },
    { method: 'GET', path: '/v1/triggers', headers: a.auth },
    {
      method: 'POST',
      path: '/v1/triggers',
      headers: { ...a.auth, ...json },
      body: JSON.stringify({
        automationId: 'auto_x',
        toolkit: 'gmail',
        triggerSlug: 'GMAIL_NEW_GMAIL_MESSAGE',
        connectedAccountId: 'ca_none',
      }),
    },
    { method: 'DELETE', path: `/v1/triggers/${triggerId}`, headers: a.auth },
    {
      method: 'POST',
      path: '/v1/mcp',
      headers: { ...a.auth, ...json, accept: 'application/json, text/event-stream' },
      body: rpc(9, 'tools/list'),
    },
    { method: 'DELETE', path: '/v1/mcp', headers: { ...a.auth, 'mcp-session-id': 'gone' } },
    { method: 'GET', path: '/metrics' },
    { method: 'GET', path: '/health' },
  ];

  it('while the body is still arriving', async () => {
    const sockets = await Promise.all(
      routes()
        .filter((r) => r.body !== undefined)
        .map(async (r) => {
          const socket = await open();
          const body = Buffer.from(r.body!);
          socket.write(
            head(r.method, r.path, r.headers ?? {}, body.length) + body.subarray(0, Math.floor(body.length / 2)).toString('utf8'),
          );
          return socket;
        }),
    );
    await delay(200);
    for (const socket of sockets) socket.destroy();
    await delay(300);
    await stillServing();
  });

  it('while the broker waits on Composio, Postgres or the long poll', async () => {
    w.h.sim.controls.injectFault({ delayMs: 1_000, durationMs: 3_000 });
    const sockets = await Promise.all(
      routes().map(async (r) => {
        const socket = await open();
        socket.write(
          head(r.method, r.path, r.headers ?? {}, r.body === undefined ? undefined : Buffer.byteLength(r.body)) + (r.body ?? ''),
        );
        return socket;
      }),
    );
    await delay(300);
    for (const socket of sockets) socket.destroy();
    // Past the held-back Composio answers, which now reach requests nobody waits for.
    await delay(1_500);
    await stillServing();
  });

  it('at every moment of a streamed MCP answer', async () => {
    const sessionId = await mcpSessionId(a);
    const since = Date.now();
    for (const after of [0, 50, 150, 300, 450]) {
      w.h.sim.controls.setMcpStreaming({ chunks: 4, intervalMs: 100, times: 1 });
      const socket = await open();
      socket.write(mcpRequest(sessionId, 10));
      await delay(after);
      socket.destroy();
    }
    await upstreamOver(since);
    await stillServing();
  });
});
