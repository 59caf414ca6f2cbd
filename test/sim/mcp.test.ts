import { afterEach, describe, expect, it } from 'vitest';
import { type Simulator, startSimulator } from '../../src/sim/index.js';

/** The Tool Router MCP endpoint over real HTTP: Streamable HTTP, JSON and SSE. */

let sim: Simulator;
afterEach(async () => sim?.close());

const BOTH = 'application/json, text/event-stream';

async function newSession(userId = 'omb_user1') {
  const res = await fetch(`${sim.origin}/api/v3.1/tool_router/session`, {
    method: 'POST',
    headers: { 'x-api-key': sim.apiKey, 'content-type': 'application/json' },
    body: JSON.stringify({ user_id: userId, multi_account: { enable: true, require_explicit_selection: true } }),
  });
  const session = (await res.json()) as { session_id: string; mcp: { url: string } };
  return session;
}

async function rpc(url: string, message: unknown, options: { accept?: string; sessionId?: string; key?: string } = {}) {
  const response = await fetch(url, {
    method: 'POST',
    headers: {
      'x-api-key': options.key ?? sim.apiKey,
      'content-type': 'application/json',
      accept: options.accept ?? BOTH,
      ...(options.sessionId ? { 'mcp-session-id': options.sessionId } : {}),
    },
    body: JSON.stringify(message),
  });
  const text = await response.text();
  const contentType = response.headers.get('content-type') ?? '';
  const messages = contentType.startsWith('text/event-stream')
    ? text
        .split('\n\n')
        .filter((e) => e.trim() !== '')
        .map((e) =>
          JSON.parse(
            e
              .split('\n')
              .find((l) => l.startsWith('data: '))
              ?.slice(6) ?? 'null',
          ),
        )
    : text
      ? [JSON.parse(text)]
      : [];
  return { status: response.status, contentType, sessionId: response.headers.get('mcp-session-id'), messages, last: messages.at(-1) };
}

async function initialize(url: string) {
  const init = await rpc(url, {
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'test', version: '1' } },
  });
  const sessionId = init.sessionId ?? '';
  expect((await rpc(url, { jsonrpc: '2.0', method: 'notifications/initialized' }, { sessionId })).status).toBe(202);
  return { init, sessionId };
}

const toolResult = (message: { result: { content: { text: string }[]; isError: boolean } }) => ({
  isError: message.result.isError,
  body: JSON.parse(message.result.content[0]?.text ?? '{}'),
});

describe('MCP endpoint', () => {
  it('initializes with an mcp-session-id and lists the router meta-tools (SSE when accepted)', async () => {
    sim = await startSimulator({ apiKey: 'k', logger: false });
    const { mcp } = await newSession();
    const { init, sessionId } = await initialize(mcp.url);
    expect(init.status).toBe(200);
    expect(init.contentType).toMatch(/^text\/event-stream/);
    expect(sessionId).toMatch(/^[0-9a-f-]{36}$/);
    expect(init.last).toMatchObject({
      jsonrpc: '2.0',
      id: 1,
      result: { protocolVersion: '2025-06-18', capabilities: { tools: {} }, serverInfo: { name: expect.any(String) } },
    });

    const list = await rpc(mcp.url, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, { sessionId });
    const tools = list.last.result.tools as { name: string; inputSchema: { type: string } }[];
    // No wait-for-connections (not asked for); the workbench is on by default.
    expect(tools.map((t) => t.name)).toEqual([
      'COMPOSIO_SEARCH_TOOLS',
      'COMPOSIO_MULTI_EXECUTE_TOOL',
      'COMPOSIO_MANAGE_CONNECTIONS',
      'COMPOSIO_REMOTE_WORKBENCH',
      'COMPOSIO_REMOTE_BASH_TOOL',
      'COMPOSIO_GET_TOOL_SCHEMAS',
    ]);
    expect(tools.every((t) => t.inputSchema.type === 'object')).toBe(true);
  });

  it('refuses a POST that does not accept both JSON and SSE (406), and answers JSON when told to', async () => {
    sim = await startSimulator({ apiKey: 'k', logger: false });
    const { mcp } = await newSession();
    const { sessionId } = await initialize(mcp.url);
    for (const accept of ['application/json', 'text/event-stream', 'text/html', '*/*']) {
      expect((await rpc(mcp.url, { jsonrpc: '2.0', id: 'p', method: 'ping' }, { sessionId, accept })).status).toBe(406);
    }
    sim.controls.setMcpStreaming({ chunks: 2, intervalMs: 0, times: 1, as: 'json' });
    const res = await rpc(mcp.url, { jsonrpc: '2.0', id: 'p', method: 'ping' }, { sessionId });
    expect(res.contentType).toMatch(/^application\/json/);
    expect(res.last).toEqual({ jsonrpc: '2.0', id: 'p', result: {} });
  });

  it('requires the key, a live session id, and a known tool router session', async () => {
    sim = await startSimulator({ apiKey: 'k', logger: false });
    const { mcp } = await newSession();
    expect((await rpc(mcp.url, { jsonrpc: '2.0', id: 1, method: 'initialize' }, { key: 'wrong' })).status).toBe(401);
    expect((await rpc(mcp.url, { jsonrpc: '2.0', id: 1, method: 'tools/list' })).status).toBe(400);
    expect((await rpc(mcp.url, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, { sessionId: 'nope' })).status).toBe(404);
    expect((await rpc(`${sim.origin}/tool_router/trs_missing/mcp`, { jsonrpc: '2.0', id: 1, method: 'initialize' })).status).toBe(404);
    const { sessionId } = await initialize(mcp.url);
    const unknown = await rpc(mcp.url, { jsonrpc: '2.0', id: 9, method: 'resources/list' }, { sessionId });
    expect(unknown.last).toMatchObject({ id: 9, error: { code: -32601 } });
  });

  it('ends an MCP session on DELETE', async () => {
    sim = await startSimulator({ apiKey: 'k', logger: false });
    const { mcp } = await newSession();
    const { sessionId } = await initialize(mcp.url);
    const del = await fetch(mcp.url, { method: 'DELETE', headers: { 'x-api-key': sim.apiKey, 'mcp-session-id': sessionId } });
    expect(del.status).toBe(200);
    expect((await rpc(mcp.url, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, { sessionId })).status).toBe(404);
  });

  it('executes a tool with the connected account', async () => {
    sim = await startSimulator({ apiKey: 'k', logger: false });
    const { mcp } = await newSession();
    const account = sim.controls.createAccount({ userId: 'omb_user1', toolkit: 'gmail', alias: 'work', status: 'ACTIVE' });
    const { sessionId } = await initialize(mcp.url);
    const call = await rpc(
      mcp.url,
      {
        jsonrpc: '2.0',
        id: 3,
        method: 'tools/call',
        params: {
          name: 'COMPOSIO_MULTI_EXECUTE_TOOL',
          arguments: {
            tools: [{ tool_slug: 'GMAIL_SEND_EMAIL', arguments: { recipient_email: 'a@b.c' } }],
            sync_response_to_workbench: false,
          },
        },
      },
      { sessionId },
    );
    const { isError, body } = toolResult(call.last);
    expect(isError).toBe(false);
    expect(body.data.results[0].response).toMatchObject({ successful: true, data: { connected_account_id: account.id } });
  });

  it('answers USER_NOT_LOGGED_IN for a toolkit whose account expired', async () => {
    sim = await startSimulator({ apiKey: 'k', logger: false });
    const { mcp } = await newSession();
    const account = sim.controls.createAccount({ userId: 'omb_user1', toolkit: 'gmail', alias: 'work', status: 'ACTIVE' });
    await sim.controls.expireAccount(account.id);
    const { sessionId } = await initialize(mcp.url);
    const call = await rpc(
      mcp.url,
      {
        jsonrpc: '2.0',
        id: 4,
        method: 'tools/call',
        params: {
          name: 'COMPOSIO_MULTI_EXECUTE_TOOL',
          arguments: { tools: [{ tool_slug: 'GMAIL_FETCH_EMAILS', arguments: {} }], sync_response_to_workbench: false },
        },
      },
      { sessionId },
    );
    const { isError, body } = toolResult(call.last);
    expect(isError).toBe(true);
    expect(body.error).toContain('USER_NOT_LOGGED_IN');
  });

  it('asks which account to use when several are active, and connects apps with a consent link', async () => {
    sim = await startSimulator({ apiKey: 'k', logger: false });
    const { mcp } = await newSession();
    sim.controls.createAccount({ userId: 'omb_user1', toolkit: 'gmail', alias: 'work', status: 'ACTIVE' });
    sim.controls.createAccount({ userId: 'omb_user1', toolkit: 'gmail', alias: 'home', status: 'ACTIVE' });
    const { sessionId } = await initialize(mcp.url);
    const ambiguous = toolResult(
      (
        await rpc(
          mcp.url,
          {
            jsonrpc: '2.0',
            id: 5,
            method: 'tools/call',
            params: {
              name: 'COMPOSIO_MULTI_EXECUTE_TOOL',
              arguments: { tools: [{ tool_slug: 'GMAIL_SEND_EMAIL', arguments: {} }], sync_response_to_workbench: false },
            },
          },
          { sessionId },
        )
      ).last,
    );
    expect(ambiguous.body.error).toMatch(/Multiple connected accounts/);
    const chosen = toolResult(
      (
        await rpc(
          mcp.url,
          {
            jsonrpc: '2.0',
            id: 6,
            method: 'tools/call',
            params: {
              name: 'COMPOSIO_MULTI_EXECUTE_TOOL',
              arguments: { tools: [{ tool_slug: 'GMAIL_SEND_EMAIL', arguments: {}, account: 'home' }], sync_response_to_workbench: false },
            },
          },
          { sessionId },
        )
      ).last,
    );
    expect(chosen.isError).toBe(false);

    const search = toolResult(
      (
        await rpc(
          mcp.url,
          {
            jsonrpc: '2.0',
            id: 7,
            method: 'tools/call',
            params: { name: 'COMPOSIO_SEARCH_TOOLS', arguments: { queries: [{ use_case: 'send a slack message' }] } },
          },
          { sessionId },
        )
      ).last,
    );
    expect(search.body.data.results[0].primary_tool_slugs).toContain('SLACK_SEND_MESSAGE');
    expect(search.body.data.toolkit_connection_statuses).toContainEqual(
      expect.objectContaining({ toolkit: 'slack', has_active_connection: false }),
    );

    const manage = toolResult(
      (
        await rpc(
          mcp.url,
          {
            jsonrpc: '2.0',
            id: 8,
            method: 'tools/call',
            params: { name: 'COMPOSIO_MANAGE_CONNECTIONS', arguments: { toolkits: ['slack', 'xero'] } },
          },
          { sessionId },
        )
      ).last,
    );
    expect(manage.body.data.results.slack).toMatchObject({ status: 'initiated', redirect_url: expect.stringContaining('/_sim/connect/') });
    expect(manage.body.data.results.xero).toMatchObject({ status: 'error', error: expect.stringContaining('does not manage auth') });
  });

  it('streams an SSE answer in several chunks, one by one, when asked to', async () => {
    sim = await startSimulator({ apiKey: 'k', logger: false });
    const { mcp } = await newSession();
    const { sessionId } = await initialize(mcp.url);
    sim.controls.setMcpStreaming({ chunks: 4, intervalMs: 120, times: 1 });
    const response = await fetch(mcp.url, {
      method: 'POST',
      headers: { 'x-api-key': sim.apiKey, 'content-type': 'application/json', accept: BOTH, 'mcp-session-id': sessionId },
      body: JSON.stringify({ jsonrpc: '2.0', id: 10, method: 'tools/list' }),
    });
    const started = performance.now();
    const arrivals: { at: number; text: string }[] = [];
    const decoder = new TextDecoder();
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      arrivals.push({ at: performance.now() - started, text: decoder.decode(chunk) });
    }
    // Progress first, the answer last, spread over time: streamed, not buffered. (Pieces that
    // arrive back to back may be read together, so count events rather than reads.)
    const all = arrivals.map((a) => a.text).join('');
    expect(all.match(/notifications\/message/g)).toHaveLength(3);
    expect(arrivals[0]?.text).not.toContain('"id":10');
    expect(arrivals.at(-1)?.text).toContain('"id":10');
    expect((arrivals.at(-1)?.at ?? 0) - (arrivals[0]?.at ?? 0)).toBeGreaterThanOrEqual(300);
    // Only once: the next answer is a single event again.
    expect((await rpc(mcp.url, { jsonrpc: '2.0', id: 11, method: 'ping' }, { sessionId })).messages).toHaveLength(1);
  });
});
