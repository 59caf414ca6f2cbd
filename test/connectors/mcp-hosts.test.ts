import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MCP_SESSIONS_KEPT } from '../../src/connectors/store.js';
import { buildTestApp, type TestApp } from '../support/app.js';
import { type ConnectorsWorld, composioRequests, type Member, member, startWorld } from './support.js';

/**
 * `/v1/mcp` as real MCP hosts use it, with the official MCP TypeScript SDK as the host: connect
 * (initialize, the initialized notification, the optional GET stream), list and call tools,
 * terminate, and come back after the broker dropped the MCP session, also when the host resends
 * its stale id on the new `initialize` (as OpenMausBot's bridge does). Against the strict
 * simulator, and against its kinder reading of an `initialize` that carries an id.
 */

const BOTH = 'application/json, text/event-stream';
const rpc = (id: number | undefined, method: string, params: unknown = {}) =>
  JSON.stringify({ jsonrpc: '2.0', ...(id === undefined ? {} : { id }), method, params });
const INITIALIZE = { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'test', version: '1' } };

/** The SDK's host side: one client on one transport, collecting what it reports as errors. */
function host(origin: string, m: Member, fetchFn?: typeof fetch) {
  const errors: unknown[] = [];
  const client = new Client({ name: 'test-host', version: '1.0.0' });
  client.onerror = (error) => errors.push(error);
  const transport = new StreamableHTTPClientTransport(new URL(`${origin}/v1/mcp`), {
    requestInit: { headers: m.auth },
    ...(fetchFn ? { fetch: fetchFn } : {}),
  });
  return { client, transport, errors };
}

/**
 * A fetch that behaves like OpenMausBot's bridge: it remembers the last `mcp-session-id` it was
 * given and sends it on every message that has none, a new `initialize` included.
 */
function bridgeFetch() {
  const state = { last: undefined as string | undefined, sentOnInitialize: [] as (string | undefined)[] };
  const fetchFn: typeof fetch = async (input, init) => {
    const headers = new Headers(init?.headers);
    if (!headers.has('mcp-session-id') && state.last) headers.set('mcp-session-id', state.last);
    if (typeof init?.body === 'string' && init.body.includes('"initialize"'))
      state.sentOnInitialize.push(headers.get('mcp-session-id') ?? undefined);
    const response = await fetch(input, { ...init, headers });
    state.last = response.headers.get('mcp-session-id') ?? state.last;
    return response;
  };
  return { fetchFn, state };
}

/** `n` MCP sessions opened (and left open) by raw initializes. */
async function openSessions(origin: string, m: Member, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const init = await fetch(`${origin}/v1/mcp`, {
      method: 'POST',
      headers: { ...m.auth, 'content-type': 'application/json', accept: BOTH },
      body: rpc(i, 'initialize', INITIALIZE),
    });
    expect(init.status).toBe(200);
    await init.body?.cancel();
  }
}

const toolText = (result: Awaited<ReturnType<Client['callTool']>>) =>
  (result.content as { type: string; text: string }[]).map((c) => c.text).join('\n');

for (const reading of ['refuse', 'new'] as const) {
  describe(`a host on the official MCP SDK (simulator: initialize with an id → ${reading})`, () => {
    let w: ConnectorsWorld;
    let a: Member;
    let origin: string;
    beforeAll(async () => {
      w = await startWorld({}, { readings: { mcpInitializeWithSessionId: reading } });
      a = await member(w.t.app);
      origin = (await w.t.app.listen({ port: 0, host: '127.0.0.1' })).replace(/\/$/, '');
    });
    afterAll(async () => w.close());

    it('connects, lists and calls tools, and terminates, with no error reported', async () => {
      const { client, transport, errors } = host(origin, a);
      await client.connect(transport);
      expect(transport.sessionId).toBeTruthy();
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name)).toEqual([
        'COMPOSIO_SEARCH_TOOLS',
        'COMPOSIO_MULTI_EXECUTE_TOOL',
        'COMPOSIO_MANAGE_CONNECTIONS',
        'COMPOSIO_WAIT_FOR_CONNECTIONS',
        'COMPOSIO_REMOTE_WORKBENCH',
        'COMPOSIO_REMOTE_BASH_TOOL',
        'COMPOSIO_GET_TOOL_SCHEMAS',
      ]);
      const ran = await client.callTool({
        name: 'COMPOSIO_MULTI_EXECUTE_TOOL',
        arguments: { tools: [{ tool_slug: 'HACKERNEWS_GET_FRONTPAGE', arguments: {} }], sync_response_to_workbench: false },
      });
      expect(ran.isError).toBe(false);
      expect(toolText(ran)).toContain('HACKERNEWS_GET_FRONTPAGE');
      // Composio's refusal of a call without a required field reaches the host as it is.
      const refused = await client.callTool({
        name: 'COMPOSIO_MULTI_EXECUTE_TOOL',
        arguments: { tools: [{ tool_slug: 'HACKERNEWS_GET_FRONTPAGE', arguments: {} }] },
      });
      expect(refused.isError).toBe(true);
      expect(toolText(refused)).toMatch(/sync_response_to_workbench/);
      const ended = transport.sessionId!;
      await transport.terminateSession();
      expect(transport.sessionId).toBeUndefined();
      await client.close();
      // The SDK's GET for a server stream got 405 (fine by the spec), not 404 (an error).
      expect(errors).toEqual([]);
      const after = await fetch(`${origin}/v1/mcp`, {
        method: 'POST',
        headers: { ...a.auth, 'content-type': 'application/json', accept: BOTH, 'mcp-session-id': ended },
        body: rpc(1, 'tools/list'),
      });
      expect(after.status).toBe(404);
    });

    it('re-initializes with its id still held, and gets a new MCP session', async () => {
      const bridge = bridgeFetch();
      const first = host(origin, a, bridge.fetchFn);
      await first.client.connect(first.transport);
      const old = first.transport.sessionId!;
      const again = host(origin, a, bridge.fetchFn);
      await again.client.connect(again.transport);
      expect(bridge.state.sentOnInitialize).toEqual([undefined, old]);
      expect(again.transport.sessionId).toBeTruthy();
      expect(again.transport.sessionId).not.toBe(old);
      expect((await again.client.listTools()).tools.length).toBeGreaterThan(0);
      await again.client.close();
      await first.client.close();
    });

    it(`reconnects after more than ${MCP_SESSIONS_KEPT} newer MCP sessions dropped its own, resending the stale id`, async () => {
      const bridge = bridgeFetch();
      const first = host(origin, a, bridge.fetchFn);
      await first.client.connect(first.transport);
      const stale = first.transport.sessionId!;
      await openSessions(origin, a, MCP_SESSIONS_KEPT + 1);
      // The broker no longer holds the old id: a request in it is told the session is gone.
      const lost = await first.client.listTools().catch((error: unknown) => error);
      expect(lost).toBeInstanceOf(StreamableHTTPError);
      expect((lost as StreamableHTTPError).code).toBe(404);
      await first.client.close();

      // The host starts over; its bridge sends the stale id with the initialize.
      bridge.state.last = stale;
      const back = host(origin, a, bridge.fetchFn);
      await back.client.connect(back.transport);
      expect(bridge.state.sentOnInitialize.at(-1)).toBe(stale);
      expect(back.transport.sessionId).toBeTruthy();
      expect(back.transport.sessionId).not.toBe(stale);
      const { tools } = await back.client.listTools();
      expect(tools.map((t) => t.name)).toContain('COMPOSIO_MANAGE_CONNECTIONS');
      expect(back.errors).toEqual([]);
      await back.client.close();
    });
  });
}

describe('GET /v1/mcp, the MCP budget, and the headers passed on', () => {
  let t: TestApp;
  let w: ConnectorsWorld;
  let a: Member;
  beforeAll(async () => {
    w = await startWorld();
    t = await buildTestApp(
      { CONNECTOR_REQUESTS_PER_MINUTE: '2', MCP_REQUESTS_PER_MINUTE: '4' },
      { database: w.t.database, composio: w.h.gateway },
    );
    a = await member(t.app);
  });
  afterAll(async () => {
    await t.close();
    await w.close();
  });

  const post = (body: string, headers: Record<string, string> = {}) =>
    t.app.inject({
      method: 'POST',
      url: '/v1/mcp',
      headers: { ...a.auth, 'content-type': 'application/json', accept: BOTH, ...headers },
      payload: body,
    });

  it('answers GET with 405 and allow: POST, DELETE, without calling Composio', async () => {
    const before = w.h.sim.controls.requests().length;
    const get = await t.app.inject({ method: 'GET', url: '/v1/mcp', headers: { ...a.auth, accept: 'text/event-stream' } });
    expect(get.statusCode).toBe(405);
    expect(get.headers.allow).toBe('POST, DELETE');
    expect(get.json()).toEqual({ error: expect.any(String), code: 'method_not_allowed' });
    expect(composioRequests(w.h, before)).toEqual([]);
    expect((await t.app.inject({ method: 'GET', url: '/v1/mcp' })).statusCode).toBe(401);
  });

  it('passes Accept and MCP-Protocol-Version on, so the MCP server’s 406 and 400 reach the host', async () => {
    const init = await post(rpc(0, 'initialize', INITIALIZE));
    expect(init.statusCode).toBe(200);
    const session = { 'mcp-session-id': String(init.headers['mcp-session-id']) };
    const onlyJson = await post(rpc(1, 'ping'), { ...session, accept: 'application/json' });
    expect(onlyJson.statusCode).toBe(406);
    expect(onlyJson.json()).toMatchObject({ jsonrpc: '2.0', error: { message: expect.stringMatching(/Not Acceptable/) } });
    const unknown = await post(rpc(2, 'ping'), { ...session, 'mcp-protocol-version': '1999-01-01' });
    expect(unknown.statusCode).toBe(400);
    expect(unknown.json()).toMatchObject({ error: { message: expect.stringMatching(/Unsupported protocol version/) } });
    expect((await post(rpc(3, 'ping'), { ...session, 'mcp-protocol-version': '2025-06-18' })).statusCode).toBe(200);
  });

  it('counts MCP requests on their own budget, and never notifications or pings', async () => {
    const b = await member(t.app);
    const send = (body: string, headers: Record<string, string> = {}) =>
      t.app.inject({
        method: 'POST',
        url: '/v1/mcp',
        headers: { ...b.auth, 'content-type': 'application/json', accept: BOTH, ...headers },
        payload: body,
      });
    const init = await send(rpc(0, 'initialize', INITIALIZE));
    expect(init.statusCode).toBe(200);
    const session = { 'mcp-session-id': String(init.headers['mcp-session-id']) };
    // Ten notifications, ten pings and a batch of notifications: none of them counts.
    for (let i = 0; i < 10; i++) {
      expect((await send(rpc(undefined, 'notifications/initialized'), session)).statusCode).toBe(202);
      expect((await send(rpc(100 + i, 'ping'), session)).statusCode).toBe(200);
    }
    // More than CONNECTOR_REQUESTS_PER_MINUTE (2): the connected-app budget is not MCP's.
    for (let i = 1; i <= 3; i++) expect((await send(rpc(i, 'tools/list'), session)).statusCode).toBe(200);
    const over = await send(rpc(9, 'tools/list'), session);
    expect(over.statusCode).toBe(429);
    expect(over.json()).toEqual({ error: expect.stringMatching(/MCP/), code: 'rate_limited' });
    // Still free while the budget is spent.
    expect((await send(rpc(200, 'ping'), session)).statusCode).toBe(200);
    expect((await send(rpc(undefined, 'notifications/cancelled', { requestId: 9 }), session)).statusCode).toBe(202);
  });
});
