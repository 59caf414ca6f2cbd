import { afterEach, describe, expect, it } from 'vitest';
import { ComposioFailure } from '../../src/composio/index.js';
import { answered, authConfigsOf, type Harness, linkToken, startHarness } from './harness.js';

/** Tool Router Sessions, their toolkits and connect links, through the real SDK. */

let h: Harness;
afterEach(async () => h?.close());

/** The simulator's hand-written toolkits, first in its catalog. */
const SIX = ['gmail', 'slack', 'github', 'googlecalendar', 'hackernews', 'xero'];

describe('Sessions', () => {
  it('creates a Session with connection management and multi-account switched on', async () => {
    h = await startHarness();
    const session = await h.gateway.createSession('omb_user1');
    expect(session).toEqual({
      sessionId: expect.stringMatching(/^trs_/),
      mcpUrl: `${h.sim.origin}/tool_router/${session.sessionId}/mcp`,
      multiAccountEnabled: true,
    });
    // What Composio received (and echoes back in the Session's config).
    const stored = h.sim.controls.state().sessions[0];
    expect(stored?.userId).toBe('omb_user1');
    expect(stored?.config.manage_connections).toEqual({
      enabled: true,
      enable_wait_for_connections: true,
      enable_connection_removal: true,
    });
    expect(stored?.config.multi_account).toEqual({ enable: true, max_accounts_per_toolkit: 5, require_explicit_selection: true });
    expect(h.sim.controls.requests().map((r) => `${r.method} ${r.path} ${r.status}`)).toEqual(['POST /api/v3.1/tool_router/session 201']);
  });

  it('gets a Session by id', async () => {
    h = await startHarness();
    const created = await h.gateway.createSession('omb_user1');
    expect(await h.gateway.getSession(created.sessionId)).toEqual(created);
  });

  it('pages through the Session’s toolkits with the account each one has selected', async () => {
    h = await startHarness();
    const session = await h.gateway.createSession('omb_user1');
    const link = await h.gateway.createLink(session.sessionId, 'gmail', { alias: 'work' });
    h.sim.controls.authorizeLink(linkToken(link.url));

    const slugs: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      // A Session holds the whole catalog (1,000 toolkits): page through the six hand-written ones.
      const page = await h.gateway.listSessionToolkits(session.sessionId, { limit: 4, toolkits: SIX, ...(cursor ? { cursor } : {}) });
      slugs.push(...page.items.map((t) => t.slug));
      cursor = page.nextCursor ?? undefined;
      pages += 1;
    } while (cursor);
    expect(pages).toBe(2);
    expect(slugs).toEqual(SIX);

    const { items } = await h.gateway.listSessionToolkits(session.sessionId, { limit: 10, toolkits: ['gmail', 'hackernews'] });
    expect(items).toEqual([
      { slug: 'gmail', name: 'Gmail', isNoAuth: false, connectedAccount: { id: link.connectedAccountId, status: 'ACTIVE' } },
      { slug: 'hackernews', name: 'Hacker News', isNoAuth: true, connectedAccount: null },
    ]);
  });
});

describe('connect links', () => {
  it('creates a pending account and a consent link that activates it', async () => {
    h = await startHarness();
    const session = await h.gateway.createSession('omb_user1');
    const link = await h.gateway.createLink(session.sessionId, 'gmail', { alias: 'work', callbackUrl: 'https://app.example/done' });
    expect(link.url).toMatch(new RegExp(`^${h.sim.origin}/_sim/connect/ln_`));
    expect(h.gateway.isTrustedHost(link.url)).toBe(true);
    expect(Date.parse(link.expiresAt ?? '')).toBeGreaterThan(Date.now());
    expect(await h.gateway.findConnectedAccount('omb_user1', link.connectedAccountId)).toMatchObject({
      status: 'INITIATED',
      alias: 'work',
      toolkit: 'gmail',
    });

    h.sim.controls.authorizeLink(linkToken(link.url));
    expect(await h.gateway.findConnectedAccount('omb_user1', link.connectedAccountId)).toMatchObject({
      status: 'ACTIVE',
      userId: 'omb_user1',
    });
  });

  it('marks the account FAILED when the person denies', async () => {
    h = await startHarness();
    const session = await h.gateway.createSession('omb_user1');
    const link = await h.gateway.createLink(session.sessionId, 'slack', { alias: 'team' });
    h.sim.controls.denyLink(linkToken(link.url));
    expect((await h.gateway.findConnectedAccount('omb_user1', link.connectedAccountId))?.status).toBe('FAILED');
  });

  it('lists the auth config Composio created for a managed toolkit', async () => {
    h = await startHarness();
    expect(authConfigsOf(h, 'gmail')).toEqual([]);
    const session = await h.gateway.createSession('omb_user1');
    await h.gateway.createLink(session.sessionId, 'gmail', { alias: 'work' });
    expect(authConfigsOf(h, 'gmail')).toEqual([
      { id: expect.stringMatching(/^ac_/), toolkit: 'gmail', authScheme: 'OAUTH2', isComposioManaged: true, enabled: true },
    ]);
  });
});

describe('MCP and trust', () => {
  const initialize = JSON.stringify({
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
  });
  const mcpInit = (signal = AbortSignal.timeout(5000)) => ({
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: new TextEncoder().encode(initialize),
    signal,
  });

  it('sends MCP requests with the project key added, and refuses an untrusted endpoint', async () => {
    h = await startHarness();
    const session = await h.gateway.createSession('user_mcp');
    const response = await h.gateway.fetchMcp(session.mcpUrl, mcpInit());
    expect(response.status).toBe(200);
    expect(response.headers.get('mcp-session-id')).toBeTruthy();
    await response.body?.cancel();
    await expect(answered(h.gateway.fetchMcp('https://evil.example/tool_router/x/mcp', mcpInit()))).rejects.toMatchObject({
      status: 502,
      code: 'upstream_unavailable',
    });
  });

  it('lets a 429 from the MCP endpoint pause every call for its retry-after', async () => {
    h = await startHarness();
    const session = await h.gateway.createSession('user_mcp_429');
    h.sim.controls.injectFault({ status: 429, retryAfter: 1, path: '/tool_router/', times: 1 });
    await expect(answered(h.gateway.fetchMcp(session.mcpUrl, mcpInit()))).rejects.toMatchObject({
      status: 503,
      code: 'upstream_rate_limited',
      headers: { 'retry-after': '1' },
    });
    const started = performance.now();
    await h.gateway.getSession(session.sessionId);
    expect(performance.now() - started).toBeGreaterThanOrEqual(900);
  });

  it('bounds the MCP answer’s status and headers by timeoutMs, not its streamed body', async () => {
    h = await startHarness({ timeoutMs: 500 });
    const session = await h.gateway.createSession('user_mcp_slow');
    h.sim.controls.setMcpStreaming({ chunks: 4, intervalMs: 250, times: 1 });
    const started = performance.now();
    const streamed = await h.gateway.fetchMcp(session.mcpUrl, {
      ...mcpInit(),
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    });
    expect(await streamed.text()).toContain('"result"');
    expect(performance.now() - started).toBeGreaterThanOrEqual(700);
    expect(h.calls.at(-1)).toMatchObject({ operation: 'mcp', outcome: 'ok' });

    h.sim.controls.injectFault({ delayMs: 3_000, path: '/tool_router/', times: 1 });
    const waited = performance.now();
    await expect(answered(h.gateway.fetchMcp(session.mcpUrl, mcpInit()))).rejects.toMatchObject({
      status: 502,
      code: 'upstream_unavailable',
      message: 'Composio did not answer within 1 s; try again shortly.',
    });
    expect(performance.now() - waited).toBeLessThan(1_500);
  });

  it('lets the caller’s abort end an MCP stream, as its own abort rather than a Composio failure', async () => {
    h = await startHarness();
    const session = await h.gateway.createSession('user_mcp_abort');
    h.sim.controls.setMcpStreaming({ chunks: 4, intervalMs: 500, times: 1 });
    const caller = new AbortController();
    const response = await h.gateway.fetchMcp(session.mcpUrl, {
      ...mcpInit(caller.signal),
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    });
    const reader = response.body!.getReader();
    await reader.read();
    caller.abort();
    await expect(reader.read()).rejects.toThrow();

    const early = new AbortController();
    early.abort();
    const refused = await h.gateway.fetchMcp(session.mcpUrl, mcpInit(early.signal)).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(Error);
    expect(refused).not.toBeInstanceOf(ComposioFailure);
  });

  it('trusts composio.dev over https and exactly the configured origin', async () => {
    h = await startHarness();
    const trusted = h.gateway.isTrustedHost;
    expect(trusted(`${h.sim.origin}/tool_router/trs_1/mcp`)).toBe(true);
    expect(trusted('https://backend.composio.dev/tool_router/trs_1/mcp')).toBe(true);
    expect(trusted('https://connect.composio.dev/link/ln_1')).toBe(true);
    expect(trusted('https://composio.dev/x')).toBe(true);
    expect(trusted('http://backend.composio.dev/x')).toBe(false);
    expect(trusted('https://evilcomposio.dev/x')).toBe(false);
    expect(trusted('https://composio.dev.evil.com/x')).toBe(false);
    expect(trusted('https://user@connect.composio.dev/x')).toBe(false);
    const port = Number(new URL(h.sim.origin).port);
    expect(trusted(`http://127.0.0.1:${port + 1}/x`)).toBe(false);
    expect(trusted(`http://localhost:${port}/x`)).toBe(false);
    expect(trusted('not a url')).toBe(false);
  });
});
