import { afterEach, describe, expect, it } from 'vitest';
import { MANY_TRIGGERS_TOOLKIT } from '../../src/sim/catalog.js';
import { type Simulator, type SimulatorOptions, startSimulator } from '../../src/sim/index.js';

/**
 * The simulator is no kinder than Composio about lists (composio-api.md §10 rows 1, 7, 8): at
 * most 50 a page (the catalog 1,000), a larger `limit` refused (or, for one test, clamped),
 * cursors that carry their page size, a catalog as large as Composio's, the Session toolkit
 * filters, and the documented 429.
 */

let sim: Simulator;
afterEach(async () => sim?.close());

async function start(options: Partial<Omit<SimulatorOptions, 'apiKey'>> = {}) {
  sim = await startSimulator({ apiKey: 'k1', logger: false, ...options });
  return sim;
}

async function call(method: string, path: string, body?: unknown) {
  const response = await fetch(`${sim.origin}${path}`, {
    method,
    headers: { 'x-api-key': sim.apiKey, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, headers: response.headers, json: text ? JSON.parse(text) : undefined };
}

/** A Session for `userId`, with one ACTIVE Gmail account seeded. */
async function sessionWithGmail(userId: string): Promise<{ sessionId: string; accountId: string }> {
  const created = await call('POST', '/api/v3.1/tool_router/session', { user_id: userId });
  const account = sim.controls.createAccount({ userId, toolkit: 'gmail', alias: 'work', status: 'ACTIVE' });
  return { sessionId: created.json.session_id, accountId: account.id };
}

/** Every list the broker reads, with the most Composio gives on one of its pages. */
async function lists(): Promise<Array<[string, number]>> {
  const { sessionId } = await sessionWithGmail('user_lists');
  return [
    ['/api/v3/toolkits', 1000],
    ['/api/v3.1/toolkits', 1000],
    [`/api/v3.1/tool_router/session/${sessionId}/toolkits`, 50],
    ['/api/v3.1/connected_accounts', 50],
    ['/api/v3.1/auth_configs', 50],
    [`/api/v3.1/triggers_types?toolkit_slugs=${MANY_TRIGGERS_TOOLKIT}`, 50],
    ['/api/v3.1/trigger_instances/active', 50],
    ['/api/v3.1/webhook_subscriptions', 50],
  ];
}

const withLimit = (path: string, limit: number) => `${path}${path.includes('?') ? '&' : '?'}limit=${limit}`;

describe('page sizes', () => {
  it('refuses a limit above the endpoint’s maximum with Composio’s 400 error body, and takes the maximum', async () => {
    await start();
    for (const [path, max] of await lists()) {
      const refused = await call('GET', withLimit(path, max + 1));
      expect(refused.status, path).toBe(400);
      expect(refused.json, path).toEqual({
        error: {
          message: `limit must be an integer between 1 and ${max}`,
          code: 10400,
          status: 400,
          request_id: expect.stringMatching(/^req_/),
        },
      });
      expect((await call('GET', withLimit(path, max))).status, path).toBe(200);
    }
  });

  it('clamps instead when told to (the kinder reading): a full page and a cursor for the rest', async () => {
    await start({ oversizedPages: 'clamp' });
    const catalog = await call('GET', '/api/v3/toolkits?limit=5000');
    expect(catalog.status).toBe(200);
    expect(catalog.json).toMatchObject({ total_items: 1000, total_pages: 1, next_cursor: null });
    expect(catalog.json.items).toHaveLength(1000);

    const types = await call('GET', `/api/v3.1/triggers_types?toolkit_slugs=${MANY_TRIGGERS_TOOLKIT}&limit=100`);
    expect(types.status).toBe(200);
    expect(types.json.items).toHaveLength(50);
    expect(types.json).toMatchObject({ total_items: 60, total_pages: 2, current_page: 1, next_cursor: expect.any(String) });
    const rest = await call('GET', `/api/v3.1/triggers_types?toolkit_slugs=${MANY_TRIGGERS_TOOLKIT}&cursor=${types.json.next_cursor}`);
    expect(rest.json.items).toHaveLength(10);
    expect(rest.json.next_cursor).toBeNull();
  });

  it('follows next_cursor to the end: every item once, pages counted, the cursor keeping its page size', async () => {
    await start();
    const slugs: string[] = [];
    const pages: number[] = [];
    let cursor: string | null = null;
    do {
      // A different limit beside a cursor changes nothing: the cursor carries its page size.
      const path: string = cursor ? `/api/v3/toolkits?cursor=${encodeURIComponent(cursor)}&limit=7` : '/api/v3/toolkits?limit=300';
      const page = await call('GET', path);
      expect(page.status).toBe(200);
      expect(page.json).toMatchObject({ total_items: 1000, total_pages: 4 });
      slugs.push(...page.json.items.map((t: { slug: string }) => t.slug));
      pages.push(page.json.current_page);
      cursor = page.json.next_cursor;
    } while (cursor);
    expect(pages).toEqual([1, 2, 3, 4]);
    expect(slugs).toHaveLength(1000);
    expect(new Set(slugs).size).toBe(1000);
    expect((await call('GET', '/api/v3/toolkits?cursor=not-a-cursor')).status).toBe(400);
  });
});

describe('the catalog', () => {
  it('holds 1,000 toolkits, the hand-written six first, made the same way by every simulator', async () => {
    await start();
    const first = (await call('GET', '/api/v3/toolkits?limit=1000')).json.items as Array<{
      slug: string;
      name: string;
      no_auth: boolean;
      composio_managed_auth_schemes: string[];
      meta: { categories: { id: string }[]; triggers_count: number };
    }>;
    await sim.close();
    await start();
    const second = (await call('GET', '/api/v3/toolkits?limit=1000')).json.items as typeof first;
    expect(second.map((t) => t.slug)).toEqual(first.map((t) => t.slug));
    expect(first.slice(0, 6).map((t) => t.slug)).toEqual(['gmail', 'slack', 'github', 'googlecalendar', 'hackernews', 'xero']);
    expect(first.every((t) => /^[a-z0-9]+$/.test(t.slug) && t.name.length > 0)).toBe(true);
    const noAuth = first.filter((t) => t.no_auth);
    expect(noAuth.length).toBeGreaterThanOrEqual(10);
    expect(noAuth.length).toBeLessThan(100);
    expect(first.filter((t) => !t.no_auth && t.composio_managed_auth_schemes.length === 0).length).toBeGreaterThan(10);
    expect(new Set(first.map((t) => t.meta.categories[0]?.id)).size).toBeGreaterThanOrEqual(10);
    expect(first.find((t) => t.slug === MANY_TRIGGERS_TOOLKIT)?.meta.triggers_count).toBe(60);
  });

  it('lists a larger catalog when told to', async () => {
    await start({ toolkits: 2500 });
    const page = await call('GET', '/api/v3.1/toolkits?limit=1000');
    expect(page.json).toMatchObject({ total_items: 2500, total_pages: 3 });
  });
});

describe('Session toolkits', () => {
  it('holds the whole catalog and filters it by is_connected, toolkits and search before the page is cut', async () => {
    await start();
    const { sessionId, accountId } = await sessionWithGmail('user_filters');
    sim.controls.createAccount({ userId: 'user_filters', toolkit: 'slack', alias: 'old', status: 'EXPIRED' });
    const toolkits = (query: string) => call('GET', `/api/v3.1/tool_router/session/${sessionId}/toolkits?${query}`);

    expect((await toolkits('limit=50')).json).toMatchObject({ total_items: 1000, total_pages: 20 });

    const connected = (await toolkits('is_connected=true&limit=50')).json;
    expect(connected).toMatchObject({ total_items: 1, next_cursor: null });
    expect(connected.items).toEqual([
      expect.objectContaining({ slug: 'gmail', connected_account: expect.objectContaining({ id: accountId, status: 'ACTIVE' }) }),
    ]);

    const unconnected = (await toolkits('is_connected=false&limit=50')).json;
    expect(unconnected.total_items).toBe(999);

    const some = (await toolkits('toolkits=slack,hackernews&limit=50')).json;
    expect(some.items.map((t: { slug: string }) => t.slug)).toEqual(['slack', 'hackernews']);
    expect(some.items[1]).toMatchObject({ is_no_auth: true, connected_account: null });

    // Search reads the name, the slug and the description.
    const byName = (await toolkits('search=calendar&limit=50')).json;
    expect(byName.items.map((t: { slug: string }) => t.slug)).toEqual(['googlecalendar']);
    const byDescription = (await toolkits('search=invoices&limit=50')).json;
    expect(byDescription.items.map((t: { slug: string }) => t.slug)).toContain('xero');
  });
});

describe('the 429', () => {
  it('answers as Composio documents it: a flat message and the X-RateLimit headers', async () => {
    await start();
    sim.controls.injectFault({ status: 429, retryAfter: 12, path: '/api/v3.1/connected_accounts' });
    const limited = await call('GET', '/api/v3.1/connected_accounts');
    expect(limited.status).toBe(429);
    expect(limited.json).toEqual({ message: 'Rate limit exceeded. Limit: 20000 requests per 10 minutes' });
    expect(Object.fromEntries([...limited.headers].filter(([name]) => /^(x-ratelimit|retry-after)/.test(name)))).toEqual({
      'retry-after': '12',
      'x-ratelimit': '20000',
      'x-ratelimit-remaining': '0',
      'x-ratelimit-window-size': '600s',
    });
  });

  it('can send the error envelope instead, another window, and no retry-after', async () => {
    await start();
    sim.controls.injectFault({ status: 429, envelope: true, windowSeconds: 60 });
    const limited = await call('GET', '/api/v3.1/connected_accounts');
    expect(limited.json).toEqual({
      error: {
        message: 'Rate limit exceeded. Limit: 20000 requests per 1 minute',
        code: 10429,
        status: 429,
        request_id: expect.stringMatching(/^req_/),
      },
    });
    expect(limited.headers.get('retry-after')).toBeNull();
    expect(limited.headers.get('x-ratelimit-window-size')).toBe('60s');
  });
});
