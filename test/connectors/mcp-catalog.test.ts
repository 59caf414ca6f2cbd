import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RECONNECT_NOTE } from '../../src/connectors/mcp-proxy.js';
import { type ConnectorsWorld, composioRequests, type Member, member, startWorld } from './support.js';

let w: ConnectorsWorld;
let a: Member;
let origin: string;
beforeAll(async () => {
  w = await startWorld();
  a = await member(w.t.app);
  origin = await w.t.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(() => w.close());

const rpc = (id: number, method: string, params: unknown = {}) => ({ jsonrpc: '2.0', id, method, params });

async function mcp(m: Member, body: unknown, headers: Record<string, string> = {}) {
  return fetch(`${origin}/v1/mcp`, {
    method: 'POST',
    headers: { ...m.auth, 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: JSON.stringify(body),
  });
}

/** Initializes an MCP session through the broker and answers its id. */
async function mcpSession(m: Member): Promise<{ 'mcp-session-id': string }> {
  const init = await mcp(
    m,
    rpc(0, 'initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'test', version: '1' } }),
  );
  await init.body?.cancel();
  return { 'mcp-session-id': init.headers.get('mcp-session-id')! };
}

/** The JSON-RPC message of a JSON or single-event SSE answer. */
async function message(response: Response): Promise<any> {
  const text = await response.text();
  if (!(response.headers.get('content-type') ?? '').startsWith('text/event-stream')) return JSON.parse(text);
  const data = text
    .split('\n')
    .filter((l) => l.startsWith('data:'))
    .map((l) => l.slice(5).trim())
    .join('');
  return JSON.parse(data);
}

describe('POST /v1/mcp', () => {
  it('initializes, lists the router tools and passes mcp-session-id both ways, with the key added here', async () => {
    const init = await mcp(
      a,
      rpc(1, 'initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'test', version: '1' } }),
    );
    expect(init.status).toBe(200);
    const sessionId = init.headers.get('mcp-session-id');
    expect(sessionId).toBeTruthy();
    expect((await message(init)).result.serverInfo).toBeDefined();

    const list = await mcp(a, rpc(2, 'tools/list'), { 'mcp-session-id': sessionId! });
    expect(list.status).toBe(200);
    const names = (await message(list)).result.tools.map((t: { name: string }) => t.name);
    expect(names).toEqual(expect.arrayContaining(['COMPOSIO_SEARCH_TOOLS', 'COMPOSIO_MULTI_EXECUTE_TOOL', 'COMPOSIO_MANAGE_CONNECTIONS']));

    const ended = await fetch(`${origin}/v1/mcp`, { method: 'DELETE', headers: { ...a.auth, 'mcp-session-id': sessionId! } });
    expect(ended.status).toBeLessThan(300);
  });

  it('streams server-sent events chunk by chunk as they arrive', async () => {
    const session = await mcpSession(a);
    w.h.sim.controls.setMcpStreaming({ chunks: 4, intervalMs: 250, times: 1 });
    const started = performance.now();
    const response = await mcp(a, rpc(3, 'tools/list'), { ...session, accept: 'text/event-stream, application/json' });
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const reader = response.body!.getReader();
    const arrivals: number[] = [];
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (value.length > 0) arrivals.push(performance.now() - started);
    }
    const finished = performance.now() - started;
    expect(arrivals.length).toBeGreaterThanOrEqual(2);
    // The first bytes came while the simulator was still sending the rest.
    expect(arrivals[0]!).toBeLessThan(finished - 500);
  });

  it('adds the reconnect note to a signed-out account’s error', async () => {
    const m = await member(w.t.app);
    const account = w.h.sim.controls.createAccount({ userId: m.userId, toolkit: 'gmail', alias: 'work', status: 'ACTIVE' });
    await w.h.sim.controls.expireAccount(account.id);
    const session = await mcpSession(m);
    const call = await mcp(
      m,
      rpc(4, 'tools/call', {
        name: 'COMPOSIO_MULTI_EXECUTE_TOOL',
        arguments: { tools: [{ tool_slug: 'GMAIL_FETCH_EMAILS', arguments: {}, account: 'work' }], sync_response_to_workbench: false },
      }),
      session,
    );
    expect(call.status).toBe(200);
    expect(JSON.stringify(await message(call))).toContain(RECONNECT_NOTE.slice(0, 40));
  });

  it('refuses a body over 2 MiB with 413 and sends nothing upstream', async () => {
    const before = w.h.sim.controls.requests().length;
    const response = await mcp(a, { jsonrpc: '2.0', id: 5, method: 'tools/call', params: { pad: 'x'.repeat(2 * 1024 * 1024) } });
    expect(response.status).toBe(413);
    expect(((await response.json()) as { code: string }).code).toBe('payload_too_large');
    expect(composioRequests(w.h, before).filter((c) => c.includes('/tool_router/'))).toEqual([]);
  });

  it('refuses a stranger before reading a huge body', async () => {
    const response = await fetch(`${origin}/v1/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${'e'.repeat(64)}`, 'content-type': 'application/json' },
      body: JSON.stringify({ pad: 'x'.repeat(3 * 1024 * 1024) }),
    });
    expect(response.status).toBe(401);
  });

  it('answers 502 with a readable error when the MCP endpoint is down', async () => {
    const session = await mcpSession(a);
    w.h.sim.controls.injectFault({ reset: true, path: '/tool_router/', times: 1 });
    const response = await mcp(a, rpc(6, 'tools/list'), session);
    expect(response.status).toBe(502);
    expect(await response.json()).toEqual({ error: expect.stringMatching(/MCP endpoint/), code: 'upstream_unavailable' });
  });

  it('refuses to send the project key to an MCP URL on an untrusted host', async () => {
    const m = await member(w.t.app);
    await mcp(m, rpc(7, 'tools/list'));
    await w.t.database
      .sql`update installations set session_mcp_url = 'https://evil.example/tool_router/x/mcp' where id = ${m.installationId}`;
    const response = await mcp(m, rpc(8, 'tools/list'));
    expect(response.status).toBe(502);
  });
});

describe('GET /v1/catalog', () => {
  it('serves Composio’s catalog, shared and cached, and a cached copy while Composio is down', async () => {
    const b = await member(w.t.app);
    const before = w.h.sim.controls.requests().length;
    const first = await w.t.app.inject({ method: 'GET', url: '/v1/catalog', headers: a.auth });
    expect(first.statusCode).toBe(200);
    expect(first.json().items.map((t: { slug: string }) => t.slug)).toContain('gmail');
    const second = await w.t.app.inject({ method: 'GET', url: '/v1/catalog', headers: b.auth });
    expect(second.json()).toEqual(first.json());
    expect(composioRequests(w.h, before).filter((c) => c.includes('/toolkits'))).toHaveLength(1);

    w.t.clock.advance(11 * 60 * 1000);
    w.h.sim.controls.injectFault({ status: 503, durationMs: 3000 });
    const stale = await w.t.app.inject({ method: 'GET', url: '/v1/catalog', headers: a.auth });
    w.h.sim.controls.clearFaults();
    expect(stale.statusCode).toBe(200);
    expect(stale.json()).toEqual(first.json());
    expect(Number(stale.headers.age)).toBeGreaterThanOrEqual(600);
  });

  it('answers 502 when Composio is down and nothing is cached', async () => {
    const fresh = await startWorld();
    try {
      const m = await member(fresh.t.app);
      fresh.h.sim.controls.injectFault({ status: 503, durationMs: 3000 });
      const response = await fresh.t.app.inject({ method: 'GET', url: '/v1/catalog', headers: m.auth });
      expect(response.statusCode).toBe(502);
      expect(response.json().code).toBe('upstream_unavailable');
    } finally {
      await fresh.close();
    }
  });
});
