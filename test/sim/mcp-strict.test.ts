import { afterEach, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../composio/harness.js';

/**
 * The simulator's MCP endpoint is at least as strict as Composio's (composio-api.md §10 rows
 * 10 and 11): Streamable HTTP as a strict server reads it, the meta tools a Session made with
 * the broker's options lists, their required fields, and slow tools as a fault.
 */

let h: Harness;
afterEach(async () => h?.close());

const BOTH = 'application/json, text/event-stream';

interface Sent {
  accept?: string;
  sessionId?: string;
  version?: string;
  signal?: AbortSignal;
}

function post(url: string, message: unknown, sent: Sent = {}) {
  return fetch(url, {
    method: 'POST',
    headers: {
      'x-api-key': h.sim.apiKey,
      'content-type': 'application/json',
      accept: sent.accept ?? BOTH,
      ...(sent.sessionId ? { 'mcp-session-id': sent.sessionId } : {}),
      ...(sent.version ? { 'mcp-protocol-version': sent.version } : {}),
    },
    body: JSON.stringify(message),
    ...(sent.signal ? { signal: sent.signal } : {}),
  });
}

/** The JSON-RPC answer in a JSON or SSE body. */
async function answerOf(response: Response): Promise<any> {
  const text = await response.text();
  if (!(response.headers.get('content-type') ?? '').startsWith('text/event-stream')) return JSON.parse(text);
  const data = text
    .split('\n')
    .filter((l) => l.startsWith('data: '))
    .at(-1);
  return JSON.parse(data?.slice(6) ?? 'null');
}

const initialize = (version = '2025-06-18') => ({
  jsonrpc: '2.0',
  id: 0,
  method: 'initialize',
  params: { protocolVersion: version, capabilities: {}, clientInfo: { name: 'test', version: '1' } },
});

/** A Session as the broker makes it (through the gateway), and an MCP session on it. */
async function brokerSession() {
  h = await startHarness();
  const session = await h.gateway.createSession('omb_strict');
  const init = await post(session.mcpUrl, initialize());
  expect(init.status).toBe(200);
  await init.body?.cancel();
  return { url: session.mcpUrl, sessionId: init.headers.get('mcp-session-id')!, trs: session.sessionId };
}

const call = (id: number, name: string, args: unknown) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } });

describe('Streamable HTTP, strictly', () => {
  it('refuses a POST that does not accept both JSON and SSE with 406', async () => {
    const { url, sessionId } = await brokerSession();
    for (const accept of ['application/json', 'text/event-stream', '*/*']) {
      const refused = await post(url, { jsonrpc: '2.0', id: 1, method: 'ping' }, { accept, sessionId });
      expect(refused.status).toBe(406);
      expect(await refused.json()).toMatchObject({ jsonrpc: '2.0', error: { message: expect.stringMatching(/Not Acceptable/) } });
    }
    expect((await post(url, { jsonrpc: '2.0', id: 1, method: 'ping' }, { sessionId })).status).toBe(200);
  });

  it('refuses an MCP-Protocol-Version it does not speak with 400, and negotiates on initialize', async () => {
    const { url, sessionId } = await brokerSession();
    const refused = await post(url, { jsonrpc: '2.0', id: 1, method: 'ping' }, { sessionId, version: '1999-01-01' });
    expect(refused.status).toBe(400);
    expect(await refused.json()).toMatchObject({ error: { message: expect.stringMatching(/Unsupported protocol version/) } });
    expect((await post(url, { jsonrpc: '2.0', id: 2, method: 'ping' }, { sessionId, version: '2025-06-18' })).status).toBe(200);
    // A client asking for a version the server does not speak gets the server's own.
    const newer = await answerOf(await post(url, initialize('2099-01-01')));
    expect(newer.result.protocolVersion).toBe('2025-06-18');
    const older = await answerOf(await post(url, initialize('2025-03-26')));
    expect(older.result.protocolVersion).toBe('2025-03-26');
  });

  it('answers GET with 405 and allow: POST, DELETE', async () => {
    const { url, sessionId } = await brokerSession();
    const get = await fetch(url, { headers: { 'x-api-key': h.sim.apiKey, accept: 'text/event-stream', 'mcp-session-id': sessionId } });
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST, DELETE');
  });

  it('refuses an initialize that carries an mcp-session-id (strict), or starts a new session (the kinder reading)', async () => {
    const { url, sessionId } = await brokerSession();
    const again = await post(url, initialize(), { sessionId });
    expect(again.status).toBe(400);
    await h.close();

    h = await startHarness({}, { readings: { mcpInitializeWithSessionId: 'new' } });
    const session = await h.gateway.createSession('omb_kind');
    const first = await post(session.mcpUrl, initialize());
    await first.body?.cancel();
    const renewed = await post(session.mcpUrl, initialize(), { sessionId: first.headers.get('mcp-session-id')! });
    expect(renewed.status).toBe(200);
    expect(renewed.headers.get('mcp-session-id')).not.toBe(first.headers.get('mcp-session-id'));
    await renewed.body?.cancel();
  });
});

describe('meta tools', () => {
  it('lists the seven meta tools a Session with the broker’s options lists, as its tool_router_tools says', async () => {
    const { url, sessionId, trs } = await brokerSession();
    const list = await answerOf(await post(url, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, { sessionId }));
    const names = list.result.tools.map((t: { name: string }) => t.name);
    expect(names).toEqual([
      'COMPOSIO_SEARCH_TOOLS',
      'COMPOSIO_MULTI_EXECUTE_TOOL',
      'COMPOSIO_MANAGE_CONNECTIONS',
      'COMPOSIO_WAIT_FOR_CONNECTIONS',
      'COMPOSIO_REMOTE_WORKBENCH',
      'COMPOSIO_REMOTE_BASH_TOOL',
      'COMPOSIO_GET_TOOL_SCHEMAS',
    ]);
    const multi = list.result.tools.find((t: { name: string }) => t.name === 'COMPOSIO_MULTI_EXECUTE_TOOL');
    expect(multi.inputSchema.required).toEqual(['tools', 'sync_response_to_workbench']);
    const wire = await fetch(`${h.sim.origin}/api/v3.1/tool_router/session/${trs}`, { headers: { 'x-api-key': h.sim.apiKey } });
    expect(((await wire.json()) as { tool_router_tools: string[] }).tool_router_tools).toEqual(names);
  });

  it('refuses a multi-execute without sync_response_to_workbench, with 0 or 51 tools, or an item without arguments', async () => {
    const { url, sessionId } = await brokerSession();
    const one = { tool_slug: 'HACKERNEWS_GET_FRONTPAGE', arguments: {} };
    const refusals: [unknown, RegExp][] = [
      [{ tools: [one] }, /sync_response_to_workbench is required/],
      [{ tools: [one], sync_response_to_workbench: 'no' }, /must be a boolean/],
      [{ tools: [], sync_response_to_workbench: false }, /1 to 50 items/],
      [{ tools: Array.from({ length: 51 }, () => one), sync_response_to_workbench: false }, /1 to 50 items/],
      [{ tools: [{ tool_slug: 'HACKERNEWS_GET_FRONTPAGE' }], sync_response_to_workbench: false }, /tools\[0\]\.arguments/],
      [{ tools: [{ arguments: {} }], sync_response_to_workbench: false }, /tools\[0\]\.tool_slug/],
    ];
    for (const [index, [args, why]] of refusals.entries()) {
      const answer = await answerOf(await post(url, call(index, 'COMPOSIO_MULTI_EXECUTE_TOOL', args), { sessionId }));
      expect(answer.result.isError, JSON.stringify(args).slice(0, 80)).toBe(true);
      expect(answer.result.content[0].text).toMatch(why);
    }
    const fifty = await answerOf(
      await post(
        url,
        call(9, 'COMPOSIO_MULTI_EXECUTE_TOOL', { tools: Array.from({ length: 50 }, () => one), sync_response_to_workbench: false }),
        {
          sessionId,
        },
      ),
    );
    expect(fifty.result.content[0].text).not.toMatch(/Input validation error/);
  });

  it('refuses a tool the Session does not list', async () => {
    h = await startHarness();
    const res = await fetch(`${h.sim.origin}/api/v3.1/tool_router/session`, {
      method: 'POST',
      headers: { 'x-api-key': h.sim.apiKey, 'content-type': 'application/json' },
      body: JSON.stringify({ user_id: 'u', workbench: { enable: false } }),
    });
    const url = ((await res.json()) as { mcp: { url: string } }).mcp.url;
    const init = await post(url, initialize());
    await init.body?.cancel();
    const sessionId = init.headers.get('mcp-session-id')!;
    const answer = await answerOf(await post(url, call(1, 'COMPOSIO_REMOTE_BASH_TOOL', { command: 'ls' }), { sessionId }));
    expect(answer.error).toMatchObject({ code: -32602, message: expect.stringMatching(/Unknown tool/) });
  });
});

describe('slow tools as a fault', () => {
  it('answers JSON only after the delay: status, headers and body together', async () => {
    const { url, sessionId } = await brokerSession();
    h.sim.controls.injectFault({ path: '/tool_router/', answerAs: 'json', delayMs: 600 });
    const started = performance.now();
    const response = await post(url, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, { sessionId });
    expect(performance.now() - started).toBeGreaterThanOrEqual(550);
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    expect((await answerOf(response)).result.tools).toHaveLength(7);
  });

  it('streams SSE at once, keeps sending, and answers after the delay', async () => {
    const { url, sessionId } = await brokerSession();
    h.sim.controls.injectFault({ path: '/tool_router/', answerAs: 'sse', delayMs: 700 });
    const started = performance.now();
    const response = await post(url, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, { sessionId });
    expect(performance.now() - started).toBeLessThan(400);
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const text = await response.text();
    expect(performance.now() - started).toBeGreaterThanOrEqual(650);
    expect(text.match(/^: /gm)?.length).toBeGreaterThanOrEqual(3);
    expect(text).toContain('"COMPOSIO_GET_TOOL_SCHEMAS"');
  });

  it('does not hold back notifications, and records a caller that hung up as abandoned', async () => {
    const { url, sessionId } = await brokerSession();
    h.sim.controls.injectFault({ path: '/tool_router/', answerAs: 'json', delayMs: 5_000 });
    // A notification has no answer to slow down; the fault waits for the next request.
    expect((await post(url, { jsonrpc: '2.0', method: 'notifications/initialized' }, { sessionId })).status).toBe(202);
    const before = h.sim.controls.requests().length;
    const gone = new AbortController();
    const pending = post(url, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, { sessionId, signal: gone.signal }).catch((e) => e);
    await new Promise((resolve) => setTimeout(resolve, 300));
    gone.abort();
    expect(await pending).toBeInstanceOf(Error);
    await expect.poll(() => h.sim.controls.requests()[before]?.abandoned).toBe(true);
    expect(h.sim.controls.requests()[before]).toMatchObject({ method: 'POST', status: null });
  });

  it('refuses answerAs with anything but delayMs', async () => {
    h = await startHarness();
    expect(() => h.sim.controls.injectFault({ answerAs: 'json', status: 500 })).toThrow(/answerAs/);
    expect(() => h.sim.controls.injectFault({ answerAs: 'json' } as never)).toThrow();
  });
});
