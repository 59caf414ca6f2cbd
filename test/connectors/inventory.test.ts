import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ConnectorsWorld, composioRequests, type Member, member, startWorld } from './support.js';

let w: ConnectorsWorld;
let a: Member;
let b: Member;

beforeAll(async () => {
  w = await startWorld();
  a = await member(w.t.app);
  b = await member(w.t.app);
  const seed = w.h.sim.controls.createAccount;
  seed({ userId: a.userId, toolkit: 'gmail', alias: 'work', status: 'ACTIVE' });
  seed({ userId: a.userId, toolkit: 'gmail', alias: 'personal', status: 'ACTIVE' });
  seed({ userId: a.userId, toolkit: 'slack', alias: 'acme', status: 'EXPIRED' });
  seed({ userId: b.userId, toolkit: 'gmail', alias: 'work', status: 'ACTIVE' });
  seed({ userId: b.userId, toolkit: 'slack', alias: 'team', status: 'INITIATED' });
});
afterAll(() => w.close());

const connected = (m: Member) => w.t.app.inject({ method: 'GET', url: '/v1/connectors/connected', headers: m.auth });

describe('GET /v1/connectors/connected', () => {
  it('shows each installation its own labelled accounts and never another’s', async () => {
    const forA = (await connected(a)).json();
    expect(forA.configured).toBe(true);
    expect(forA.services.gmail).toMatchObject({ connected: true, pending: false, status: 'ACTIVE' });
    expect(forA.services.gmail.accounts.map((x: { alias: string }) => x.alias).sort()).toEqual(['personal', 'work']);
    expect(forA.services.slack).toMatchObject({ connected: false, pending: false, status: 'EXPIRED' });

    const forB = (await connected(b)).json();
    expect(forB.services.gmail.accounts.map((x: { alias: string }) => x.alias)).toEqual(['work']);
    expect(forB.services.slack).toMatchObject({ connected: false, pending: true, status: 'INITIATED' });

    const idsA = new Set(Object.values(forA.services).flatMap((s: any) => s.accounts.map((x: any) => x.id)));
    const idsB = Object.values(forB.services).flatMap((s: any) => s.accounts.map((x: any) => x.id));
    expect(idsB.filter((id) => idsA.has(id))).toEqual([]);
  });

  it('exposes only ids, labels and statuses', async () => {
    const body = (await connected(a)).json();
    for (const service of Object.values(body.services) as any[]) {
      expect(Object.keys(service).sort()).toEqual(['accounts', 'connected', 'pending', 'status']);
      for (const account of service.accounts) expect(Object.keys(account).every((k) => ['id', 'alias', 'status'].includes(k))).toBe(true);
    }
    expect(JSON.stringify(body)).not.toMatch(/access_token|api_key|sim_test_key/);
  });

  it('creates the Session once, then reuses it from the database; /v1/me costs no Composio call', async () => {
    const fresh = await member(w.t.app);
    const before = w.h.sim.controls.requests().length;
    await connected(fresh);
    await connected(fresh);
    const calls = composioRequests(w.h, before);
    expect(calls.filter((c) => c === 'POST /api/v3.1/tool_router/session')).toHaveLength(1);
    expect(calls.filter((c) => c.startsWith('GET /api/v3.1/tool_router/session/') && !c.endsWith('/toolkits'))).toHaveLength(0);

    const beforeMe = w.h.sim.controls.requests().length;
    expect((await w.t.app.inject({ method: 'GET', url: '/v1/me', headers: fresh.auth })).statusCode).toBe(200);
    expect(composioRequests(w.h, beforeMe)).toEqual([]);
  });

  it('makes the inventory from the two paginated sweeps alone, over several pages', async () => {
    const many = await member(w.t.app);
    for (let i = 0; i < 120; i += 1) {
      w.h.sim.controls.createAccount({
        userId: many.userId,
        toolkit: i % 2 ? 'github' : 'googlecalendar',
        alias: `old-${i}`,
        status: 'FAILED',
      });
    }
    await connected(many); // the Session is made here
    const before = w.h.sim.controls.requests().length;
    const body = (await connected(many)).json();
    expect(body.services.github.accounts).toHaveLength(60);
    expect(body.services.googlecalendar.accounts).toHaveLength(60);
    const calls = composioRequests(w.h, before);
    const accountPages = calls.filter((c) => c === 'GET /api/v3.1/connected_accounts');
    const toolkitPages = calls.filter((c) => /^GET \/api\/v3\.1\/tool_router\/session\/[^/]+\/toolkits$/.test(c));
    expect(accountPages).toHaveLength(3);
    expect(toolkitPages.length).toBeGreaterThanOrEqual(1);
    expect(calls).toHaveLength(accountPages.length + toolkitPages.length);
  });

  it('falls back to the Session’s view when the project key may not list accounts', async () => {
    w.h.sim.controls.injectFault({ status: 403, path: '/api/v3.1/connected_accounts', method: 'GET', times: 1 });
    const response = await connected(a);
    expect(response.statusCode).toBe(200);
    const body = response.json();
    // The Session still shows the account it has selected for Gmail.
    expect(body.services.gmail.connected).toBe(true);
    expect(body.services.gmail.accounts.length).toBeGreaterThanOrEqual(1);
  });

  it('recreates a Session Composio no longer knows, for the same user', async () => {
    const m = await member(w.t.app);
    w.h.sim.controls.createAccount({ userId: m.userId, toolkit: 'gmail', alias: 'kept', status: 'ACTIVE' });
    await connected(m);
    await w.t.database.sql`update installations set session_id = 'trs_forgotten' where id = ${m.installationId}`;
    const response = await connected(m);
    expect(response.statusCode).toBe(200);
    expect(response.json().services.gmail.accounts.map((x: any) => x.alias)).toEqual(['kept']);
    const [row] = await w.t.database.sql`select session_id from installations where id = ${m.installationId}`;
    expect(row!.session_id).not.toBe('trs_forgotten');
    const session = w.h.sim.controls.state().sessions.find((s) => s.id === row!.session_id);
    expect(session?.userId).toBe(m.userId);
  });

  it('answers 502 with a readable error while Composio is down', async () => {
    w.h.sim.controls.injectFault({ status: 503, durationMs: 2000 });
    const response = await connected(a);
    w.h.sim.controls.clearFaults();
    expect(response.statusCode).toBe(502);
    expect(response.json()).toEqual({ error: expect.stringMatching(/Composio/), code: 'upstream_unavailable' });
  });
});

describe('GET /v1/connectors?services=', () => {
  it('answers one key per asked slug, connected or not', async () => {
    const response = await w.t.app.inject({ method: 'GET', url: '/v1/connectors?services=gmail,slack,github', headers: a.auth });
    expect(response.statusCode).toBe(200);
    const body = response.json();
    expect(Object.keys(body.services).sort()).toEqual(['github', 'gmail', 'slack']);
    expect(body.services.github).toEqual({ connected: false, pending: false, status: 'NOT_CONNECTED', accounts: [] });
    expect(body.services.gmail.connected).toBe(true);
  });

  it.each([
    ['no services', '/v1/connectors'],
    ['an empty list', '/v1/connectors?services=,'],
    ['a bad slug', '/v1/connectors?services=Gmail'],
    ['a hostile slug', '/v1/connectors?services=../../etc'],
  ])('refuses %s with 400 naming the field', async (_name, url) => {
    const response = await w.t.app.inject({ method: 'GET', url, headers: a.auth });
    expect(response.statusCode).toBe(400);
    expect(response.json().error).toMatch(/^query\.services/);
  });
});

describe('connected-app routes without a valid token', () => {
  it.each([
    ['GET', '/v1/connectors/connected'],
    ['GET', '/v1/connectors?services=gmail'],
    ['POST', '/v1/connectors/gmail/authorize'],
    ['DELETE', '/v1/connectors/gmail'],
    ['DELETE', '/v1/connectors/gmail/accounts/ca_x'],
    ['GET', '/v1/catalog'],
    ['POST', '/v1/mcp'],
    ['DELETE', '/v1/mcp'],
  ])('%s %s answers 401 and calls no Composio', async (method, url) => {
    const before = w.h.sim.controls.requests().length;
    const response = await w.t.app.inject({
      method: method as 'GET',
      url,
      headers: { authorization: `Bearer ${'0'.repeat(64)}`, 'content-type': 'application/json' },
      payload: method === 'POST' ? '{}' : undefined,
    });
    expect(response.statusCode).toBe(401);
    expect(composioRequests(w.h, before)).toEqual([]);
  });
});

describe('per-installation budget', () => {
  it('answers 429 past the limit, for that installation only', async () => {
    const limited = await startWorld({ CONNECTOR_REQUESTS_PER_MINUTE: '2' });
    try {
      const x = await member(limited.t.app);
      const y = await member(limited.t.app);
      const get = (m: Member) => limited.t.app.inject({ method: 'GET', url: '/v1/connectors/connected', headers: m.auth });
      expect((await get(x)).statusCode).toBe(200);
      expect((await get(x)).statusCode).toBe(200);
      const refused = await get(x);
      expect(refused.statusCode).toBe(429);
      expect(refused.json().code).toBe('rate_limited');
      expect((await get(y)).statusCode).toBe(200);
    } finally {
      await limited.close();
    }
  });
});
