import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { composioUserIdFor } from '../../src/installations/tokens.js';
import { type Simulator, startSimulator } from '../../src/sim/index.js';
import { BROKER_ENV, insertTrigger, signed, type TestTrigger, triggerMessage } from '../events/helpers.js';
import { type BrokerProcess, startBroker } from '../support/broker-process.js';
import { withDatabase } from '../support/database.js';
import { type Registered, registerOver } from '../support/http.js';
import { type PgBouncer, startPgBouncer } from '../support/pgbouncer.js';
import { githubCommitBody } from '../triggers/support.js';

/**
 * Three broker processes on one Postgres through Debian's PgBouncer in transaction mode, with a
 * server pool smaller than their pools together, as operators run many processes: each broker's
 * `DATABASE_URL` is the bouncer, its `DATABASE_DIRECT_URL` Postgres itself (LISTEN, session locks,
 * migrations). Whatever the bouncer does, nothing answered `2xx` may be lost, and a poll held on
 * one process wakes for a webhook taken by another within a second.
 */

const BROKERS = 3;
/** Each broker's pool; the bouncer's server pool is smaller than the three together. */
const POOL_SIZE = 4;
const SERVER_POOL = 6;
const TIMEOUT_MS = 3_000;
const INSTALLATIONS = 6;

let name: string;
let direct: string;
let admin: postgres.Sql;
let sql: postgres.Sql;
let bouncer: PgBouncer;
let sim: Simulator;
let brokers: BrokerProcess[] = [];

beforeAll(async () => {
  const adminUrl = inject('pgAdminUrl');
  name = `omb_pooled_${randomBytes(6).toString('hex')}`;
  admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${name} template ${inject('pgTemplate')}`);
  direct = withDatabase(adminUrl, name);
  sql = postgres(direct, { max: 2, onnotice: () => {}, connection: { application_name: 'omb-test' } });
  bouncer = await startPgBouncer({ upstream: direct, poolSize: SERVER_POOL });
  sim = await startSimulator({ apiKey: `sim_pooled_${randomBytes(8).toString('hex')}`, logger: false });
  const env = {
    ...BROKER_ENV,
    COMPOSIO_API_KEY: sim.apiKey,
    COMPOSIO_BASE_URL: sim.origin,
    DATABASE_URL: bouncer.url(name),
    DATABASE_DIRECT_URL: direct,
    DATABASE_POOL_SIZE: String(POOL_SIZE),
    DATABASE_TIMEOUT_MS: String(TIMEOUT_MS),
    QUOTA_STANDARD: '1000000',
    REGISTRATIONS_PER_MINUTE: '1000',
  };
  brokers = await Promise.all(Array.from({ length: BROKERS }, () => startBroker(env, { timeoutMs: 90_000 })));
}, 120_000);

afterAll(async () => {
  await Promise.all(brokers.map((broker) => broker.stop('SIGKILL')));
  await sql?.end({ timeout: 1 });
  await bouncer?.stop();
  await sim?.close();
  await admin?.unsafe(`drop database if exists ${name} with (force)`);
  await admin?.end();
});

interface Subscriber extends Registered {
  readonly trigger: TestTrigger;
}

async function subscribers(count: number): Promise<Subscriber[]> {
  return Promise.all(
    Array.from({ length: count }, async (_, i) => {
      const registered = await registerOver(brokers[i % BROKERS]!.url);
      return { ...registered, trigger: await insertTrigger({ sql }, registered.installationId) };
    }),
  );
}

/** A signed webhook carrying `n` for the subscriber's trigger, posted to `broker`: its status (0 when nothing answered). */
async function sendWebhook(broker: BrokerProcess, to: Subscriber, n: number): Promise<number> {
  const delivery = signed(triggerMessage(to.trigger, { n }));
  try {
    const response = await fetch(`${broker.url}/v1/webhooks/composio`, {
      method: 'POST',
      headers: delivery.headers,
      body: delivery.body,
      signal: AbortSignal.timeout(TIMEOUT_MS + 5_000),
    });
    await response.arrayBuffer();
    return response.status;
  } catch {
    return 0;
  }
}

interface Polled {
  readonly status: number;
  readonly ns: number[];
  readonly cursor?: string;
}

async function pollOnce(broker: BrokerProcess, who: Subscriber, cursor: string | undefined, waitSeconds: number): Promise<Polled> {
  const query = new URLSearchParams({ limit: '100', wait: String(waitSeconds), ...(cursor ? { cursor } : {}) });
  const response = await fetch(`${broker.url}/v1/events?${query}`, { headers: who.auth });
  if (response.status !== 200) return { status: response.status, ns: [] };
  const batch = (await response.json()) as { events: Array<{ data: { n: number } }>; cursor: string };
  return { status: 200, ns: batch.events.map((event) => event.data.n), cursor: batch.cursor };
}

/** Every `n` left in the subscriber's queue, acknowledging as it goes. */
async function drain(broker: BrokerProcess, who: Subscriber): Promise<number[]> {
  const ns: number[] = [];
  let cursor: string | undefined;
  for (;;) {
    const batch = await pollOnce(broker, who, cursor, 0);
    if (batch.status !== 200) throw new Error(`poll answered ${batch.status}`);
    if (batch.ns.length === 0) return ns;
    ns.push(...batch.ns);
    cursor = batch.cursor;
  }
}

/** The most connections Postgres held for the test's database at once, sampled until `stop`, leaving out the test's own. */
function connectionPeak(): { stop(): Promise<number> } {
  let peak = 0;
  let running = true;
  const sampling = (async () => {
    while (running) {
      const [row] = await sql<{ n: number }[]>`
        select count(*)::int as n from pg_stat_activity
         where datname = ${name} and backend_type = 'client backend' and application_name <> 'omb-test'`;
      peak = Math.max(peak, row!.n);
      await sleep(50);
    }
  })();
  // Stopped by the test; a failing test may end the connection under it first.
  sampling.catch(() => undefined);
  return {
    async stop() {
      running = false;
      await sampling;
      return peak;
    },
  };
}

const percentile = (values: number[], p: number) =>
  [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(values.length * p))]!;

describe('three brokers through PgBouncer in transaction mode', () => {
  it('deliver every webhook once and in order, wake polls across processes within a second, keep the limits exact, and hold no more connections than the pool and LISTEN', async () => {
    const subs = await subscribers(INSTALLATIONS);
    const peak = connectionPeak();

    // Each installation's webhooks one after another, to the three brokers in turn, all the
    // installations at once; each one's poll held on a broker the webhook did not go to.
    const EACH = 40;
    const answers: number[] = [];
    const received = new Map<string, number[]>();
    await Promise.all(
      subs.flatMap((who, i) => [
        (async () => {
          for (let n = 1; n <= EACH; n++) answers.push(await sendWebhook(brokers[(i + n) % BROKERS]!, who, n));
        })(),
        (async () => {
          const ns: number[] = [];
          let cursor: string | undefined;
          for (let round = 0; ns.length < EACH && round < 500; round++) {
            const batch = await pollOnce(brokers[(i + round) % BROKERS]!, who, cursor, 5);
            expect(batch.status).toBe(200);
            ns.push(...batch.ns);
            cursor = batch.cursor ?? cursor;
          }
          received.set(who.installationId, ns);
          // The last batch acknowledged: nothing is left.
          expect((await pollOnce(brokers[i % BROKERS]!, who, cursor, 0)).ns).toEqual([]);
        })(),
      ]),
    );
    expect(answers.filter((status) => status !== 200)).toEqual([]);
    for (const who of subs) expect(received.get(who.installationId)).toEqual(Array.from({ length: EACH }, (_, k) => k + 1));

    // Wake-ups across processes: a poll waits on one broker, the webhook goes to another.
    const wakeMs: number[] = [];
    for (let round = 0; round < 12; round++) {
      await Promise.all(
        subs.map(async (who, i) => {
          const holder = brokers[(i + round) % BROKERS]!;
          const sender = brokers[(i + round + 1) % BROKERS]!;
          const waiting = pollOnce(holder, who, undefined, 25).then((batch) => ({ batch, at: performance.now() }));
          await sleep(300);
          const sentAt = performance.now();
          expect(await sendWebhook(sender, who, 1000 + round)).toBe(200);
          const { batch, at } = await waiting;
          expect(batch.ns).toEqual([1000 + round]);
          wakeMs.push(at - sentAt);
          await pollOnce(holder, who, batch.cursor, 0);
        }),
      );
    }
    const wakeP99 = percentile(wakeMs, 0.99);
    console.info(`cross-process wake-ups through PgBouncer: p50 ${Math.round(percentile(wakeMs, 0.5))} ms, p99 ${Math.round(wakeP99)} ms`);
    expect(wakeP99).toBeLessThan(1_000);

    // The check-in limit (30 a minute per token) is one count across the three.
    const checkIns = await Promise.all(
      Array.from({ length: 90 }, (_, k) => fetch(`${brokers[k % BROKERS]!.url}/v1/me`, { headers: subs[0]!.auth }).then((r) => r.status)),
    );
    expect(checkIns.filter((status) => status === 200)).toHaveLength(30);
    expect(checkIns.filter((status) => status === 429)).toHaveLength(60);

    // Postgres held at most the bouncer's server pool and each broker's direct connections
    // (LISTEN, and up to two for the repair jobs' session locks), where the brokers' pools
    // together are twice the server pool.
    const most = await peak.stop();
    console.info(`Postgres connections for the three brokers at most: ${most} (server pool ${SERVER_POOL}, ${BROKERS} × 3 direct)`);
    expect(most).toBeLessThanOrEqual(SERVER_POOL + BROKERS * 3);
    expect(most).toBeLessThan(BROKERS * (POOL_SIZE + 2));
  }, 180_000);

  it('store every trigger they answer 201 for, made at once through the three (a transaction each)', async () => {
    const subs = await subscribers(INSTALLATIONS);
    const made = await Promise.all(
      subs.flatMap((who, i) =>
        Array.from({ length: 5 }, async (_, k) => {
          const account = sim.controls.createAccount({
            userId: composioUserIdFor(who.installationId),
            toolkit: 'github',
            alias: `repo${k}`,
            status: 'ACTIVE',
          });
          const response = await fetch(`${brokers[(i + k) % BROKERS]!.url}/v1/triggers`, {
            method: 'POST',
            headers: { ...who.auth, 'content-type': 'application/json' },
            body: JSON.stringify(githubCommitBody(account.id, { automationId: `auto_${k}` })),
          });
          return { status: response.status, body: (await response.json()) as { id?: string } };
        }),
      ),
    );
    expect(made.map((m) => m.status)).toEqual(made.map(() => 201));
    const ids = made.map((m) => m.body.id!);
    const stored = await sql<{ id: string }[]>`select id from triggers where id = any(${ids}::uuid[])`;
    expect(stored.map((row) => row.id).sort()).toEqual([...ids].sort());
  }, 60_000);

  it('refuse to start on the pooler alone, where LISTEN would be deaf and session locks land anywhere, naming DATABASE_DIRECT_URL', async () => {
    // As an operator might try first: the bouncer told to drop the parameter it refuses.
    const lenient = await startPgBouncer({ upstream: direct, poolSize: 2, extra: { ignore_startup_parameters: 'statement_timeout' } });
    try {
      const env = { ...BROKER_ENV, DATABASE_URL: lenient.url(name) };
      await expect(startBroker(env, { timeoutMs: 60_000 })).rejects.toThrow(
        /exited with 78[\s\S]*DATABASE_URL does not keep a session[\s\S]*Set DATABASE_DIRECT_URL/,
      );
      await expect(startBroker({ ...env, DATABASE_DIRECT_URL: lenient.url(name) }, { timeoutMs: 60_000 })).rejects.toThrow(
        /exited with 78[\s\S]*DATABASE_DIRECT_URL does not keep a session/,
      );
    } finally {
      await lenient.stop();
    }
  }, 120_000);

  it('loses nothing answered 2xx when PgBouncer is killed and started again under load, answers only 503 meanwhile, and serves within 5 s of its return', async () => {
    const subs = await subscribers(3);
    const sent: Array<{ who: Subscriber; n: number; status: number; at: number; ms: number }> = [];
    let sending = true;
    const senders = subs.map(async (who, i) => {
      for (let n = 1; sending; n++) {
        const startedAt = performance.now();
        const status = await sendWebhook(brokers[(i + n) % BROKERS]!, who, n);
        sent.push({ who, n, status, at: performance.now(), ms: performance.now() - startedAt });
        if (status !== 200) await sleep(100);
      }
    });
    await sleep(2_000);
    await bouncer.kill();
    await sleep(3_000);
    await bouncer.start();
    const backAt = performance.now();
    await sleep(6_000);
    sending = false;
    await Promise.all(senders);

    expect(sent.filter((s) => s.status !== 200 && s.status !== 503).map((s) => s.status)).toEqual([]);
    expect(sent.filter((s) => s.status === 503).length).toBeGreaterThan(0);
    // Nothing held: a refused webhook is refused within the database bound.
    expect(Math.max(...sent.map((s) => s.ms))).toBeLessThan(TIMEOUT_MS + 2_000);
    const firstBack = Math.min(...sent.filter((s) => s.status === 200 && s.at > backAt).map((s) => s.at));
    console.info(`first webhook accepted ${Math.round(firstBack - backAt)} ms after PgBouncer was back`);
    expect(firstBack - backAt).toBeLessThan(5_000);
    // Every broker still runs: a connection lost while the driver read its types stops none.
    for (const broker of brokers) expect(broker.child.exitCode).toBeNull();

    for (const who of subs) {
      const delivered = await drain(brokers[1]!, who);
      const accepted = sent.filter((s) => s.who === who && s.status === 200).map((s) => s.n);
      expect(new Set(delivered).size).toBe(delivered.length);
      expect(delivered).toEqual([...delivered].sort((a, b) => a - b));
      expect(accepted.filter((n) => !delivered.includes(n))).toEqual([]);
    }
  }, 120_000);
});
