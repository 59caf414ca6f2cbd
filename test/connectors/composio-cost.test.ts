import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { AppError } from '../../src/errors.js';
import { MANY_TRIGGERS_TOOLKIT, TOOLKITS } from '../../src/sim/catalog.js';
import type { RecordedRequest, SimulatorOptions } from '../../src/sim/index.js';
import { answered, connectAccount, type Harness, startHarness } from '../composio/harness.js';
import { buildTestApp, type TestApp } from '../support/app.js';
import { composioRequests, type Member, member } from './support.js';

/**
 * What each route costs in Composio calls against a Composio as large as the real one (1,000
 * toolkits, composio-api.md §10 rows 1, 7 and 8), counted where the calls arrive (the
 * simulator's request log), and that no page the broker asks for is larger than Composio takes.
 */

interface World {
  t: TestApp;
  h: Harness;
  close(): Promise<void>;
}

async function startWorld(simulator: Partial<Omit<SimulatorOptions, 'apiKey'>> = {}): Promise<World> {
  const h = await startHarness({}, simulator);
  const t = await buildTestApp({ CONNECTOR_REQUESTS_PER_MINUTE: '10000', REGISTRATIONS_PER_MINUTE: '100000' }, { composio: h.gateway });
  return {
    t,
    h,
    async close() {
      await t.close();
      await h.close();
    },
  };
}

/** The most items a page of each list Composio takes (`/toolkits` 1,000, every other list 50). */
const maxPageOf = (path: string) => (/\/toolkits$/.test(path) && !path.includes('/tool_router/') ? 1000 : 50);

/** Requests that asked for a page larger than Composio takes. */
function oversized(requests: readonly RecordedRequest[]): string[] {
  return requests
    .filter((r) => {
      const limit = new URLSearchParams(r.query).get('limit');
      return limit !== null && Number(limit) > maxPageOf(r.path);
    })
    .map((r) => `${r.method} ${r.path}?${r.query}`);
}

const NO_AUTH = TOOLKITS.filter((t) => t.noAuth).map((t) => t.slug);
const LAST = TOOLKITS[TOOLKITS.length - 1]!.slug;

describe('against the strict 1,000-toolkit simulator', () => {
  let w: World;
  let a: Member;
  beforeAll(async () => {
    w = await startWorld();
    a = await member(w.t.app);
  });
  afterAll(() => w.close());

  const get = (m: Member, url: string) => w.t.app.inject({ method: 'GET', url, headers: m.auth });

  it('GET /v1/connectors/connected costs at most 3 calls (2 once the catalog is cached) and shows every account and no-auth app', async () => {
    const seed = w.h.sim.controls.createAccount;
    seed({ userId: a.userId, toolkit: 'gmail', alias: 'work', status: 'ACTIVE' });
    seed({ userId: a.userId, toolkit: LAST, alias: 'far', status: 'ACTIVE' });
    seed({ userId: a.userId, toolkit: TOOLKITS[700]!.slug, alias: 'gone', status: 'EXPIRED' });
    seed({ userId: a.userId, toolkit: 'slack', alias: 'half', status: 'INITIATED' });
    // The Session is made once per installation, by its first connected-app request.
    expect((await get(a, '/v1/connectors?services=gmail')).statusCode).toBe(200);

    const cold = w.h.sim.controls.requests().length;
    const response = await get(a, '/v1/connectors/connected');
    expect(response.statusCode).toBe(200);
    const calls = composioRequests(w.h, cold);
    expect(calls.length).toBeLessThanOrEqual(3);
    expect(calls.sort()).toEqual(
      ['GET /api/v3.1/connected_accounts', `GET /api/v3.1/tool_router/session/${sessionOf(w)}/toolkits`, 'GET /api/v3/toolkits'].sort(),
    );

    const { services } = response.json();
    expect(services.gmail).toMatchObject({ connected: true, status: 'ACTIVE', accounts: [{ alias: 'work', status: 'ACTIVE' }] });
    expect(services[LAST]).toMatchObject({ connected: true, accounts: [{ alias: 'far', status: 'ACTIVE' }] });
    expect(services[TOOLKITS[700]!.slug]).toMatchObject({ connected: false, status: 'EXPIRED' });
    expect(services.slack).toMatchObject({ connected: false, pending: true, status: 'INITIATED' });
    // Apps that need no sign-in are usable, as before: all of them, wherever they sit in the catalog.
    for (const slug of NO_AUTH) expect(services[slug], slug).toEqual({ connected: true, pending: false, status: 'ACTIVE', accounts: [] });
    expect(Object.keys(services).sort()).toEqual([...new Set(['gmail', LAST, TOOLKITS[700]!.slug, 'slack', ...NO_AUTH])].sort());

    const warm = w.h.sim.controls.requests().length;
    expect((await get(a, '/v1/connectors/connected')).json()).toEqual(response.json());
    expect(composioRequests(w.h, warm)).toHaveLength(2);
  });

  it('asks the Session only for its connected toolkits, and Composio only for this user’s accounts', async () => {
    const since = w.h.sim.controls.requests().length;
    await get(a, '/v1/connectors/connected');
    const requests = w.h.sim.controls.requests().slice(since);
    const toolkits = requests.find((r) => r.path.endsWith('/toolkits') && r.path.includes('/tool_router/'));
    expect(new URLSearchParams(toolkits?.query).get('is_connected')).toBe('true');
    const accounts = requests.find((r) => r.path === '/api/v3.1/connected_accounts');
    expect(new URLSearchParams(accounts?.query).get('user_ids')).toBe(a.userId);
  });

  it('GET /v1/catalog offers every app, and costs nothing while cached', async () => {
    const fresh = await startWorld();
    try {
      const m = await member(fresh.t.app);
      const response = await fresh.t.app.inject({ method: 'GET', url: '/v1/catalog', headers: m.auth });
      expect(response.statusCode).toBe(200);
      const body = response.json();
      expect(body.items.map((t: { slug: string }) => t.slug)).toEqual(TOOLKITS.map((t) => t.slug));
      expect(body).toMatchObject({ next_cursor: null, total_items: 1000 });
      expect(composioRequests(fresh.h)).toEqual(['GET /api/v3/toolkits']);

      const warm = fresh.h.sim.controls.requests().length;
      expect((await fresh.t.app.inject({ method: 'GET', url: '/v1/catalog', headers: m.auth })).json()).toEqual(body);
      expect(composioRequests(fresh.h, warm)).toEqual([]);
    } finally {
      await fresh.close();
    }
  });

  it('GET /v1/triggers/types completes an app with more than a page of trigger types, 50 a page', async () => {
    const since = w.h.sim.controls.requests().length;
    const response = await get(a, `/v1/triggers/types?toolkit=${MANY_TRIGGERS_TOOLKIT}`);
    expect(response.statusCode).toBe(200);
    expect(response.json().types).toHaveLength(60);
    const pages = w.h.sim.controls.requests().slice(since);
    expect(pages.map((r) => [r.path, new URLSearchParams(r.query).get('limit'), r.status])).toEqual([
      ['/api/v3.1/triggers_types', '50', 200],
      ['/api/v3.1/triggers_types', '50', 200],
    ]);
  });

  it('POST /v1/triggers creates a trigger (its types read 50 a page)', async () => {
    const m = await member(w.t.app);
    const { accountId } = await connectAccount(w.h, m.userId, MANY_TRIGGERS_TOOLKIT, 'desk');
    const since = w.h.sim.controls.requests().length;
    const created = await w.t.app.inject({
      method: 'POST',
      url: '/v1/triggers',
      headers: m.auth,
      payload: {
        automationId: 'auto_desk',
        toolkit: MANY_TRIGGERS_TOOLKIT,
        triggerSlug: `${MANY_TRIGGERS_TOOLKIT.toUpperCase()}_CAMPAIGN_MERGED`,
        connectedAccountId: accountId,
      },
    });
    expect(created.statusCode).toBe(201);
    expect(composioRequests(w.h, since)).toContain(
      `POST /api/v3.1/trigger_instances/${MANY_TRIGGERS_TOOLKIT.toUpperCase()}_CAMPAIGN_MERGED/upsert`,
    );
  });

  it('never asked Composio for a page larger than it takes', () => {
    expect(w.h.sim.controls.requests().length).toBeGreaterThan(10);
    expect(oversized(w.h.sim.controls.requests())).toEqual([]);
    expect(w.h.sim.controls.requests().filter((r) => r.status === 400)).toEqual([]);
  });
});

describe('a catalog larger than one page', () => {
  it('is followed to its last page: every app in the catalog and in the inventory, then nothing while cached', async () => {
    const big = await startWorld({ toolkits: 2500 });
    try {
      const m = await member(big.t.app);
      const catalog = await big.t.app.inject({ method: 'GET', url: '/v1/catalog', headers: m.auth });
      expect(catalog.json()).toMatchObject({ next_cursor: null, total_items: 2500 });
      expect(new Set(catalog.json().items.map((t: { slug: string }) => t.slug)).size).toBe(2500);
      expect(composioRequests(big.h)).toEqual(['GET /api/v3/toolkits', 'GET /api/v3/toolkits', 'GET /api/v3/toolkits']);

      // A no-auth app far past the 1,000th is shown, and the catalog is not read again.
      const far = catalog
        .json()
        .items.filter((t: { no_auth: boolean }) => t.no_auth)
        .at(-1).slug as string;
      const since = big.h.sim.controls.requests().length;
      const inventory = await big.t.app.inject({ method: 'GET', url: '/v1/connectors/connected', headers: m.auth });
      expect(inventory.json().services[far]).toMatchObject({ connected: true });
      expect(composioRequests(big.h, since).filter((c) => c === 'GET /api/v3/toolkits')).toEqual([]);
      expect(oversized(big.h.sim.controls.requests())).toEqual([]);
    } finally {
      await big.close();
    }
  });
});

describe('the kinder reading: Composio clamps a larger limit', () => {
  it('gives the broker the same answers', async () => {
    const kind = await startWorld({ oversizedPages: 'clamp' });
    try {
      const m = await member(kind.t.app);
      kind.h.sim.controls.createAccount({ userId: m.userId, toolkit: 'gmail', alias: 'work', status: 'ACTIVE' });
      const inventory = await kind.t.app.inject({ method: 'GET', url: '/v1/connectors/connected', headers: m.auth });
      expect(inventory.json().services.gmail).toMatchObject({ connected: true });
      expect((await kind.t.app.inject({ method: 'GET', url: '/v1/catalog', headers: m.auth })).json().total_items).toBe(1000);
      const types = await kind.t.app.inject({ method: 'GET', url: `/v1/triggers/types?toolkit=${MANY_TRIGGERS_TOOLKIT}`, headers: m.auth });
      expect(types.json().types).toHaveLength(60);
      expect(oversized(kind.h.sim.controls.requests())).toEqual([]);
    } finally {
      await kind.close();
    }
  });
});

describe('Composio’s 429', () => {
  let h: Harness;
  afterEach(() => h?.close());
  const rejection = (p: Promise<unknown>) =>
    answered(p).then(
      () => undefined,
      (e: unknown) => e as AppError,
    );

  it.each([
    ['the documented flat body', false],
    ['the error envelope', true],
  ])('is read in %s, and its Retry-After honoured', async (_name, envelope) => {
    h = await startHarness({ timeoutMs: 2_000 });
    h.sim.controls.injectFault({ status: 429, retryAfter: 9, envelope });
    const error = await rejection(h.gateway.listConnectedAccounts({ userId: 'u1', limit: 50 }));
    expect(error).toMatchObject({ status: 503, code: 'upstream_rate_limited', headers: { 'retry-after': '9' } });
    // The pause holds for every call after it, without asking Composio again.
    const next = await rejection(h.gateway.getCatalog());
    expect(Number(next?.headers['retry-after'])).toBeGreaterThanOrEqual(8);
    expect(h.sim.controls.requests()).toHaveLength(1);
  });

  it('without Retry-After, waits out the spent window (a minute at most) rather than a few seconds', async () => {
    h = await startHarness({ timeoutMs: 2_000 });
    h.sim.controls.injectFault({ status: 429 });
    const error = await rejection(h.gateway.listConnectedAccounts({ userId: 'u1', limit: 50 }));
    expect(error).toMatchObject({ status: 503, code: 'upstream_rate_limited', headers: { 'retry-after': '60' } });
  });
});

/** The Session id the installation's inventory used (the one the simulator holds for its user). */
function sessionOf(w: World): string {
  const sessions = w.h.sim.controls.state().sessions;
  if (sessions.length !== 1) throw new Error(`expected one Session, found ${sessions.length}`);
  return sessions[0]!.id;
}
