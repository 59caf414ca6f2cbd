import { afterEach, describe, expect, it } from 'vitest';
import { type Simulator, startSimulator } from '../../src/sim/index.js';

/** The simulator's wire behaviour, checked with plain HTTP (no SDK in between). */

let sim: Simulator;
afterEach(async () => sim?.close());

async function call(method: string, path: string, options: { key?: string | null; body?: unknown; headers?: Record<string, string> } = {}) {
  const headers: Record<string, string> = { ...(options.headers ?? {}) };
  if (options.key !== null) headers['x-api-key'] = options.key ?? sim.apiKey;
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(`${sim.origin}${path}`, {
    method,
    headers,
    ...(options.body !== undefined ? { body: JSON.stringify(options.body) } : {}),
  });
  const text = await response.text();
  return {
    status: response.status,
    contentType: response.headers.get('content-type'),
    headers: response.headers,
    json: text ? JSON.parse(text) : undefined,
  };
}

const errorShape = (status: number) => ({
  error: { message: expect.any(String), code: expect.any(Number), status, request_id: expect.stringMatching(/^req_/) },
});

describe('authentication', () => {
  it('answers 401 with Composio’s error body without a key, with a wrong key, or with two credentials', async () => {
    sim = await startSimulator({ apiKey: 'k1', logger: false });
    for (const res of [
      await call('GET', '/api/v3.1/connected_accounts', { key: null }),
      await call('GET', '/api/v3.1/connected_accounts', { key: 'wrong' }),
      await call('GET', '/api/v3.1/connected_accounts', { headers: { 'x-user-api-key': 'uak_1' } }),
      await call('POST', '/tool_router/trs_x/mcp', { key: null, body: {} }),
    ]) {
      expect(res.status).toBe(401);
      expect(res.contentType).toMatch(/^application\/json/);
      expect(res.json).toMatchObject(errorShape(401));
    }
  });

  it('does not ask for a key on the developer pages', async () => {
    sim = await startSimulator({ apiKey: 'k1', logger: false });
    expect((await call('GET', '/_sim/state', { key: null })).status).toBe(200);
  });
});

describe('shapes', () => {
  it('answers creates with 201 and a Session with everything the SDK reads', async () => {
    sim = await startSimulator({ apiKey: 'k1', logger: false });
    const res = await call('POST', '/api/v3.1/tool_router/session', { body: { user_id: 'u1', manage_connections: { enable: true } } });
    expect(res.status).toBe(201);
    expect(res.json).toMatchObject({
      session_id: expect.stringMatching(/^trs_/),
      mcp: { type: 'http', url: `${sim.origin}/tool_router/${res.json.session_id}/mcp` },
      // What this Session lists over MCP: no wait-for-connections (not asked for), the workbench on.
      tool_router_tools: [
        'COMPOSIO_SEARCH_TOOLS',
        'COMPOSIO_MULTI_EXECUTE_TOOL',
        'COMPOSIO_MANAGE_CONNECTIONS',
        'COMPOSIO_REMOTE_WORKBENCH',
        'COMPOSIO_REMOTE_BASH_TOOL',
        'COMPOSIO_GET_TOOL_SCHEMAS',
      ],
      config: { user_id: 'u1', preload: { tools: [] }, search: {}, execute: {}, manage_connections: { enabled: true } },
      config_version: 1,
    });
    const link = await call('POST', `/api/v3.1/tool_router/session/${res.json.session_id}/link`, {
      body: { toolkit: 'gmail', alias: 'work' },
    });
    expect(link.status).toBe(201);
    expect(link.json).toEqual({
      link_token: expect.stringMatching(/^ln_/),
      redirect_url: expect.stringMatching(new RegExp(`^${sim.origin}/_sim/connect/ln_`)),
      expires_at: expect.any(String),
      connected_account_id: expect.stringMatching(/^ca_/),
      experimental: { account_type: 'PRIVATE' },
    });
    const sub = await call('POST', '/api/v3.1/webhook_subscriptions', { body: { webhook_url: 'http://127.0.0.1:9/h' } });
    expect(sub.status).toBe(201);
    expect(sub.json).toMatchObject({
      id: expect.any(String),
      version: 'V3',
      enabled_events: ['composio.trigger.message'],
      secret: expect.any(String),
    });
    expect((await call('POST', '/api/v3.1/webhook_subscriptions', { body: { webhook_url: 'http://127.0.0.1:9/h' } })).status).toBe(409);
  });

  it('pages with opaque cursors and Composio’s envelope, and splits list parameters on commas', async () => {
    sim = await startSimulator({ apiKey: 'k1', logger: false });
    for (let i = 0; i < 5; i++)
      sim.controls.createAccount({ userId: i < 3 ? 'u1' : 'u2', toolkit: 'gmail', alias: `a${i}`, status: 'ACTIVE' });
    sim.controls.createAccount({ userId: 'u3', toolkit: 'gmail', alias: 'z', status: 'ACTIVE' });
    const first = await call('GET', '/api/v3.1/connected_accounts?user_ids=u1,u2&limit=2');
    expect(first.json).toMatchObject({ next_cursor: expect.any(String), total_pages: 3, current_page: 1, total_items: 5 });
    expect(first.json.items).toHaveLength(2);
    const last = await call('GET', `/api/v3.1/connected_accounts?user_ids=u1,u2&cursor=${encodeURIComponent(first.json.next_cursor)}`);
    const third = await call('GET', `/api/v3.1/connected_accounts?user_ids=u1,u2&cursor=${encodeURIComponent(last.json.next_cursor)}`);
    expect(third.json).toMatchObject({ next_cursor: null, current_page: 3 });
    expect(third.json.items).toHaveLength(1);
    expect((await call('GET', '/api/v3.1/connected_accounts?cursor=garbage')).status).toBe(400);
  });

  it('answers unknown routes and bad JSON in Composio’s error shape', async () => {
    sim = await startSimulator({ apiKey: 'k1', logger: false });
    const missing = await call('GET', '/api/v3.1/nothing');
    expect(missing.status).toBe(404);
    expect(missing.json).toMatchObject(errorShape(404));
    const res = await fetch(`${sim.origin}/api/v3.1/tool_router/session`, {
      method: 'POST',
      headers: { 'x-api-key': sim.apiKey, 'content-type': 'application/json' },
      body: '{nope',
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject(errorShape(400));
  });

  it('sends retry-after on an injected 429 and counts the request', async () => {
    sim = await startSimulator({ apiKey: 'k1', logger: false });
    sim.controls.injectFault({ status: 429, retryAfter: 7, path: '/api/v3/toolkits' });
    const limited = await call('GET', '/api/v3/toolkits');
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('7');
    // Composio's documented 429 (composio-api.md §10 row 8): a flat body and its rate-limit headers.
    expect(limited.json).toEqual({ message: expect.stringMatching(/^Rate limit exceeded\. Limit: \d+ requests per /) });
    expect(limited.headers.get('x-ratelimit')).toMatch(/^\d+$/);
    expect(limited.headers.get('x-ratelimit-remaining')).toBe('0');
    expect(limited.headers.get('x-ratelimit-window-size')).toBe('600s');
    expect((await call('GET', '/api/v3/toolkits')).status).toBe(200);
    expect(sim.controls.requests().map((r) => r.status)).toEqual([429, 200]);
  });

  it('applies a fault for a duration', async () => {
    sim = await startSimulator({ apiKey: 'k1', logger: false });
    sim.controls.injectFault({ status: 503, durationMs: 60_000 });
    expect((await call('GET', '/api/v3/toolkits')).status).toBe(503);
    expect((await call('GET', '/api/v3.1/connected_accounts')).status).toBe(503);
    sim.controls.clearFaults();
    expect((await call('GET', '/api/v3/toolkits')).status).toBe(200);
  });
});
