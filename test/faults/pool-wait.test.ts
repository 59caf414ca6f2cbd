import { randomBytes, randomUUID } from 'node:crypto';
import type { InjectOptions } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/database.js';
import { installations } from '../../src/db/schema.js';
import { composioUserIdFor } from '../../src/installations/tokens.js';
import { createLogger } from '../../src/logger.js';
import { BROKER_ENV, insertTrigger, signed, type TestTrigger, triggerMessage } from '../events/helpers.js';
import { buildTestApp, register, type TestApp } from '../support/app.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.js';
import { expectUnavailable, timedInject } from './unavailable.js';

/**
 * No request waits for the database longer than DATABASE_TIMEOUT_MS, whatever the pool is doing:
 * a query or a transaction that has not finished within it fails (`503 database_unavailable`
 * with `retry-after`), and what was given up on while it waited never runs later. `/health`
 * answers within about a second on a connection of its own. The app reaches Postgres through a
 * proxy the test cuts, with a pool of two connections the test can fill.
 */

const TIMEOUT_MS = 1_500;
/** Past the bound, what a busy two-core machine may add before the answer is out. */
const MARGIN_MS = 1_000;
const POOL_SIZE = 2;
/**
 * How long fillPool holds the pool: past TIMEOUT_MS + MARGIN_MS, so that what the pool did not
 * give up on by the bound is still waiting when the bound is checked.
 */
const HOLD_SECONDS = 3;
const WEBHOOKS = 12;

let real: TestDatabase;
let proxy: TcpProxy;
let viaProxy: ReturnType<typeof openDatabase>;
let t: TestApp;
let auth: { authorization: string };
let trigger: TestTrigger;

beforeAll(async () => {
  real = await createTestDatabase();
  const target = new URL(real.url);
  proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port) });
  target.port = String(proxy.port);
  viaProxy = openDatabase({ url: target.toString(), poolSize: POOL_SIZE, logger: createLogger('silent'), timeoutMs: TIMEOUT_MS });
  t = await buildTestApp(
    { ...BROKER_ENV, DATABASE_TIMEOUT_MS: String(TIMEOUT_MS), REGISTRATIONS_PER_MINUTE: '1000' },
    { database: { ...viaProxy, name: real.name, drop: async () => {} } },
  );
  const registered = await register(t.app);
  auth = registered.auth;
  trigger = await insertTrigger(real, registered.installationId);
});
afterAll(async () => {
  await t?.close();
  await proxy?.close();
  await real?.drop();
});

function webhook(): InjectOptions {
  const delivery = signed(triggerMessage(trigger, { n: 1 }), { at: t.clock.now() });
  return { method: 'POST', url: '/v1/webhooks/composio', headers: delivery.headers, payload: delivery.body };
}

/** An installation row's values: a write the test can later look for. */
function newInstallation() {
  const id = randomUUID();
  return { id, tokenHash: randomBytes(32).toString('hex'), composioUserId: composioUserIdFor(id) };
}

async function stored(id: string): Promise<boolean> {
  return (await real.sql`select 1 from installations where id = ${id}`).length > 0;
}

/**
 * Fills every connection of the app's pool with a transaction that sleeps `seconds` (one second
 * per statement, each well within the statement timeout); resolves once every one has started.
 */
async function fillPool(seconds: number): Promise<{ done: Promise<unknown> }> {
  const started: Promise<void>[] = [];
  const holders: Promise<unknown>[] = [];
  for (let i = 0; i < POOL_SIZE; i++) {
    let begun!: () => void;
    started.push(new Promise<void>((resolve) => (begun = resolve)));
    holders.push(
      viaProxy.sql.begin(async (tx) => {
        begun();
        for (let s = 0; s < seconds; s++) await tx`select pg_sleep(1)`;
      }),
    );
  }
  await Promise.all(started);
  return { done: Promise.all(holders) };
}

async function failure(promise: Promise<unknown>): Promise<{ error: unknown; ms: number }> {
  const started = performance.now();
  try {
    await promise;
  } catch (error) {
    return { error, ms: performance.now() - started };
  }
  throw new Error('expected the database use to fail');
}

/** The error's code, or its cause's (drizzle wraps the driver's error in its own). */
function codeOf(error: unknown): unknown {
  const { code, cause } = error as { code?: unknown; cause?: unknown };
  return code ?? (cause ? codeOf(cause) : undefined);
}

function expectGivenUp({ error, ms }: { error: unknown; ms: number }) {
  expect(codeOf(error)).toBe('DATABASE_TIMEOUT');
  expect(ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
  expect(ms).toBeLessThan(TIMEOUT_MS + MARGIN_MS);
}

describe('the pool full of slow statements', () => {
  it('fails a query still waiting for a connection past the bound, and it never runs', async () => {
    const pool = await fillPool(HOLD_SECONDS);
    const row = newInstallation();
    const sqlRow = newInstallation();
    const [viaDrizzle, viaSql] = await Promise.all([
      failure(viaProxy.db.insert(installations).values(row)),
      failure(viaProxy.sql`insert into installations (id, token_hash, composio_user_id)
                           values (${sqlRow.id}, ${sqlRow.tokenHash}, ${sqlRow.composioUserId})`),
    ]);
    expectGivenUp(viaDrizzle);
    expectGivenUp(viaSql);
    await pool.done;
    // The pool is free again and serves what comes now; what was given up on stays undone.
    await viaProxy.sql`select 1`;
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(await stored(row.id)).toBe(false);
    expect(await stored(sqlRow.id)).toBe(false);
  });

  it('never runs the callback of a transaction given up on before it started', async () => {
    const pool = await fillPool(HOLD_SECONDS);
    const row = newInstallation();
    const sqlRow = newInstallation();
    let callbacks = 0;
    const [viaDrizzle, viaSql] = await Promise.all([
      failure(
        viaProxy.db.transaction(async (tx) => {
          callbacks++;
          await tx.insert(installations).values(row);
        }),
      ),
      failure(
        viaProxy.sql.begin(async (tx) => {
          callbacks++;
          await tx`insert into installations (id, token_hash, composio_user_id)
                   values (${sqlRow.id}, ${sqlRow.tokenHash}, ${sqlRow.composioUserId})`;
        }),
      ),
    ]);
    expectGivenUp(viaDrizzle);
    expectGivenUp(viaSql);
    await pool.done;
    await viaProxy.sql`select 1`;
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(callbacks).toBe(0);
    expect(await stored(row.id)).toBe(false);
    expect(await stored(sqlRow.id)).toBe(false);
  });

  it('answers requests 503 within the bound, and /health 200 at once', async () => {
    const pool = await fillPool(HOLD_SECONDS);
    const [me, hook, health] = await Promise.all([
      timedInject(t.app, { method: 'GET', url: '/v1/me', headers: auth }),
      timedInject(t.app, webhook()),
      timedInject(t.app, { method: 'GET', url: '/health' }),
    ]);
    expect(health.response.statusCode).toBe(200);
    expect(health.response.json()).toEqual({ status: 'ok', database: 'ok' });
    expect(health.ms).toBeLessThan(1_000);
    for (const { response, ms } of [me, hook]) {
      expectUnavailable(response);
      expect(ms).toBeLessThan(TIMEOUT_MS + MARGIN_MS);
    }
    await pool.done;
    expect((await t.app.inject({ method: 'GET', url: '/v1/me', headers: auth })).statusCode).toBe(200);
  });
});

describe('Postgres refusing connections', () => {
  it('answers every request 503 within the bound and /health within a second, then 2xx once it is back', async () => {
    await proxy.down();
    const row = newInstallation();
    let answers: Awaited<ReturnType<typeof timedInject>>[];
    let given: { error: unknown; ms: number };
    try {
      const requests = [
        ...Array.from({ length: WEBHOOKS }, () => webhook()),
        ...Array.from({ length: 6 }, (): InjectOptions => ({ method: 'GET', url: '/v1/me', headers: auth })),
      ];
      const healthChecks = (async () => {
        const checks: Awaited<ReturnType<typeof timedInject>>[] = [];
        // One probe after another while the requests are held, as a balancer's checks come.
        for (let i = 0; i < 4; i++) checks.push(await timedInject(t.app, { method: 'GET', url: '/health' }));
        return checks;
      })();
      [answers, given] = await Promise.all([
        Promise.all(requests.map((request) => timedInject(t.app, request))),
        failure(viaProxy.db.insert(installations).values(row)),
      ]);
      for (const { response, ms } of await healthChecks) {
        expectUnavailable(response);
        expect(ms).toBeLessThan(1_000 + 500);
      }
    } finally {
      await proxy.up();
    }
    for (const [i, { response, ms }] of answers.entries()) {
      expectUnavailable(response);
      // A webhook also waits in the intake's group commit, outside the pool, for a batch ahead of
      // it; a batch the database cannot serve refuses every message waiting behind it at once
      // (src/events/intake/ingest-batcher.ts), so that wait is inside the same bound.
      expect(ms, i < WEBHOOKS ? 'a webhook' : '/v1/me').toBeLessThan(TIMEOUT_MS + MARGIN_MS);
    }
    expect(given.ms).toBeLessThan(TIMEOUT_MS + MARGIN_MS);
    // Back: every connection reconnects (none is left stuck by what was given up on).
    await expect
      .poll(async () => (await t.app.inject({ method: 'GET', url: '/health' })).statusCode, { timeout: 10_000, interval: 200 })
      .toBe(200);
    await expect
      .poll(async () => (await t.app.inject({ method: 'GET', url: '/v1/me', headers: auth })).statusCode, {
        timeout: 10_000,
        interval: 200,
      })
      .toBe(200);
    const again = await Promise.all(Array.from({ length: 6 }, () => timedInject(t.app, webhook())));
    for (const { response } of again) expect(response.statusCode).toBe(200);
    const many = await Promise.all(Array.from({ length: POOL_SIZE * 3 }, () => viaProxy.sql`select pg_sleep(0.05)`));
    expect(many).toHaveLength(POOL_SIZE * 3);
    expect(await stored(row.id)).toBe(false);
  });
});

describe('a pool of several connections', () => {
  it('sends array values on whichever of its connections is free', async () => {
    const fresh = openDatabase({ url: real.url, poolSize: 3, logger: createLogger('silent'), timeoutMs: TIMEOUT_MS });
    try {
      const length = async () =>
        (await fresh.sql<{ n: number }[]>`select array_length(${fresh.sql.array(['a', 'b'])}::text[], 1) as n`)[0]!.n;
      // One connection opens (and learns the array types), then all three are used at once: the
      // values are sent by connections other than the one that learnt them.
      await fresh.sql`select 1`;
      expect(await Promise.all([length(), length(), length()])).toEqual([2, 2, 2]);
    } finally {
      await fresh.close();
    }
  });
});
