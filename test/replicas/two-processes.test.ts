import { randomUUID } from 'node:crypto';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/db/embedded.js';
import { removeExpiredEvents } from '../../src/events/retention/retention.js';
import { composioUserIdFor } from '../../src/installations/tokens.js';
import { type Simulator, startSimulator } from '../../src/sim/index.js';
import { adminClaims, grantClaims, operatorKey, signClaims, type TestOperatorKey, trusting } from '../operators/support.js';
import { type BrokerProcess, startBroker } from '../support/broker-process.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { metricValue, type Registered, registerOver, until } from '../support/http.js';
import { githubCommitBody } from '../triggers/support.js';

/**
 * Two broker processes, started as `npm start` starts them, on ONE database and ONE Composio
 * (a simulator in this process, delivering its webhooks to A). Whichever process a request
 * reaches, the answer is the same: registrations, grants, the admin switches, long-poll
 * wake-ups; and background jobs run on one process at a time.
 */

const METRICS_TOKEN = 'metrics-token-replicas';

let key: TestOperatorKey;
let sim: Simulator;
let database: TestDatabase;
let a: BrokerProcess;
let b: BrokerProcess;
/** What both are started with (and a third, started by a test). */
let env: Record<string, string>;

beforeAll(async () => {
  key = await operatorKey('op-replicas');
  sim = await startSimulator({ apiKey: 'sim_replicas_key', logger: false });
  database = await createTestDatabase();

  // Composio's project delivers webhooks to one address (here A's); its secret signs them.
  const portA = await freePort();
  const subscription = await fetch(`${sim.origin}/api/v3.1/webhook_subscriptions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': sim.apiKey },
    body: JSON.stringify({
      webhook_url: `http://127.0.0.1:${portA}/v1/webhooks/composio`,
      enabled_events: ['composio.trigger.message'],
      version: 'V3',
    }),
  });
  expect(subscription.status).toBe(201);
  const { secret } = (await subscription.json()) as { secret: string };

  env = {
    DATABASE_URL: database.url,
    COMPOSIO_API_KEY: sim.apiKey,
    COMPOSIO_BASE_URL: sim.origin,
    COMPOSIO_WEBHOOK_SECRET: secret,
    METRICS_TOKEN,
    REGISTRATIONS_PER_MINUTE: '1000',
    ...trusting(key),
  };
  [a, b] = await Promise.all([startBroker({ ...env, PORT: String(portA) }), startBroker(env)]);
}, 60_000);

afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop()]);
  await sim?.close();
  await database?.drop();
}, 60_000);

async function call(broker: BrokerProcess, method: string, path: string, auth?: { authorization: string }, body?: unknown) {
  const response = await fetch(`${broker.url}${path}`, {
    method,
    headers: { ...auth, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined, at: performance.now() };
}

const asOperator = async () => ({ authorization: `Bearer ${await signClaims(key, adminClaims(new Date()))}` });

async function pollsWaiting(broker: BrokerProcess): Promise<number | undefined> {
  const response = await fetch(`${broker.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
  return metricValue(await response.text(), 'omb_long_polls_waiting');
}

/** Starts a long poll on `broker` and resolves once it is waiting there (with the poll's answer to come). */
async function waitingPoll(broker: BrokerProcess, who: Registered): Promise<{ answer: ReturnType<typeof call> }> {
  const before = (await pollsWaiting(broker)) ?? 0;
  const answer = call(broker, 'GET', '/v1/events?wait=25', who.auth);
  await until(async () => ((await pollsWaiting(broker)) ?? 0) > before, 10_000, 'the poll waiting');
  return { answer };
}

describe('two broker processes on one database', () => {
  it('know an installation registered on either', async () => {
    const who = await registerOver(a.url);
    const me = await call(b, 'GET', '/v1/me', who.auth);
    expect(me.status).toBe(200);
    expect(me.body).toMatchObject({ installationId: who.installationId, plan: 'standard' });
  });

  it('agree on the plan a grant gives, and on who holds it after it moves', async () => {
    const first = await registerOver(a.url);
    const second = await registerOver(b.url);
    const grant = await signClaims(key, grantClaims(new Date(), { sub: 'cloud-replicas' }));

    const presented = await call(a, 'PUT', '/v1/me/grant', first.auth, { grant });
    expect(presented.status).toBe(200);
    expect(presented.body).toMatchObject({ plan: 'paid' });
    expect((await call(b, 'GET', '/v1/me', first.auth)).body).toMatchObject({ plan: 'paid', quota: { eventsPerDay: 2000 } });

    // The same grant presented on B by another installation moves it; A sees the first one drop.
    expect((await call(b, 'PUT', '/v1/me/grant', second.auth, { grant })).status).toBe(200);
    expect((await call(a, 'GET', '/v1/me', second.auth)).body).toMatchObject({ plan: 'paid' });
    expect((await call(a, 'GET', '/v1/me', first.auth)).body).toMatchObject({ plan: 'standard', quota: { eventsPerDay: 500 } });
  });

  it('close and reopen registration together, whichever one the operator asked', async () => {
    try {
      const closed = await call(a, 'PUT', '/v1/admin/registration', await asOperator(), { mode: 'closed' });
      expect(closed).toMatchObject({ status: 200, body: { mode: 'closed' } });
      const refused = await call(b, 'POST', '/v1/installations', undefined, {});
      expect(refused.status).toBe(503);
      expect(refused.body).toEqual({ error: expect.any(String), code: 'registration_closed' });

      const reopened = await call(b, 'PUT', '/v1/admin/registration', await asOperator(), { mode: 'open' });
      expect(reopened).toMatchObject({ status: 200, body: { mode: 'open' } });
      expect((await call(a, 'POST', '/v1/installations', undefined, {})).status).toBe(201);
      expect((await call(b, 'POST', '/v1/installations', undefined, {})).status).toBe(201);
    } finally {
      await call(a, 'PUT', '/v1/admin/registration', await asOperator(), { mode: 'open' });
    }
  });

  it('end a poll held on one at once when an operator disables its installation on the other', async () => {
    const who = await registerOver(a.url);
    const poll = await waitingPoll(b, who);

    const disabled = await call(a, 'POST', `/v1/admin/installations/${who.installationId}/disable`, await asOperator());
    expect(disabled.status).toBe(200);
    const ended = await poll.answer;
    expect(ended.status).toBe(403);
    expect(ended.body).toEqual({ error: expect.any(String), code: 'installation_disabled' });
    expect(ended.at - disabled.at).toBeLessThan(1000);
    expect((await call(b, 'GET', '/v1/me', who.auth)).status).toBe(403);

    expect((await call(b, 'POST', `/v1/admin/installations/${who.installationId}/enable`, await asOperator())).status).toBe(200);
    expect((await call(a, 'GET', '/v1/me', who.auth)).status).toBe(200);
  });

  it('wake a poll held on one within milliseconds of Composio delivering to the other', async () => {
    const who = await registerOver(a.url);
    const trigger = await githubTrigger(who);
    const poll = await waitingPoll(b, who);
    const firedAt = performance.now();
    const delivery = await fire(trigger.composioTriggerId);
    const woken = await poll.answer;
    expect(woken.status).toBe(200);
    expect(woken.body.events).toEqual([
      expect.objectContaining({ id: delivery.webhookId, type: 'trigger.event', triggerId: trigger.id, automationId: 'auto_replicas' }),
    ]);
    expect(woken.at - firedAt).toBeLessThan(500);
  });

  it('answer 401 on one within a second of the installation removing itself on the other, though that one knew the token', async () => {
    const who = await registerOver(a.url);
    // B serves the installation first, so it knows the token and where the queue stands.
    expect((await call(b, 'GET', '/v1/me', who.auth)).status).toBe(200);
    expect((await call(b, 'GET', '/v1/events?wait=0', who.auth)).status).toBe(200);
    const poll = await waitingPoll(b, who);

    const removed = await call(a, 'DELETE', '/v1/me', who.auth);
    expect(removed.status).toBe(204);
    const ended = await poll.answer;
    expect(ended.status).toBe(401);
    expect(ended.at - removed.at).toBeLessThan(1000);
    const refusedAt = await firstAnswered(b, '/v1/events?wait=0', who, 401);
    expect(refusedAt - removed.at).toBeLessThan(1000);
    expect((await call(b, 'GET', '/v1/me', who.auth)).status).toBe(401);
  });

  it('answer 403 on one within a second of an operator disabling the installation on the other, though that one knew the token', async () => {
    const who = await registerOver(a.url);
    expect((await call(b, 'GET', '/v1/events?wait=0', who.auth)).status).toBe(200);
    const disabled = await call(a, 'POST', `/v1/admin/installations/${who.installationId}/disable`, await asOperator());
    expect(disabled.status).toBe(200);
    const refusedAt = await firstAnswered(b, '/v1/events?wait=0', who, 403);
    expect(refusedAt - disabled.at).toBeLessThan(1000);
    // Re-enabled on A: B lets it in again at once (a disabled installation is never kept in memory).
    expect((await call(a, 'POST', `/v1/admin/installations/${who.installationId}/enable`, await asOperator())).status).toBe(200);
    expect((await call(b, 'GET', '/v1/events?wait=0', who.auth)).status).toBe(200);
  });

  it('lose no event when a process holding a poll is killed: the poll held on the other is woken, and the cursor reads on there', async () => {
    const who = await registerOver(a.url);
    const trigger = await githubTrigger(who);
    const third = await startBroker(env);
    try {
      const start = await call(b, 'GET', '/v1/events?wait=0', who.auth);
      expect(start.status).toBe(200);
      // Polls held on B (which knows the queue is at its head) and on the third process.
      const onB = await waitingPoll(b, who);
      const onThird = call(third, 'GET', `/v1/events?wait=25&cursor=${start.body.cursor}`, who.auth).catch(() => ({ status: 0 }));
      await until(async () => ((await pollsWaiting(third)) ?? 0) === 1, 10_000, 'the poll waiting on the third process');
      await third.stop('SIGKILL');
      expect((await onThird).status).toBe(0);

      const firedAt = performance.now();
      const delivery = await fire(trigger.composioTriggerId);
      const woken = await onB.answer;
      expect(woken.body.events.map((e: { id: string }) => e.id)).toEqual([delivery.webhookId]);
      expect(woken.at - firedAt).toBeLessThan(1000);
      // The client of the killed process polls again with the cursor it had, on either process.
      for (const broker of [a, b]) {
        const again = await call(broker, 'GET', `/v1/events?wait=0&cursor=${start.body.cursor}`, who.auth);
        expect(again.body.events.map((e: { id: string }) => e.id)).toEqual([delivery.webhookId]);
      }
    } finally {
      await third.stop('SIGKILL');
    }
  });
});

/** A GitHub trigger of `who`'s, made through B (Composio delivers to A): its id and Composio's. */
async function githubTrigger(who: Registered): Promise<{ id: string; composioTriggerId: string }> {
  const account = sim.controls.createAccount({
    userId: composioUserIdFor(who.installationId),
    toolkit: 'github',
    alias: 'work',
    status: 'ACTIVE',
  });
  const created = await call(b, 'POST', '/v1/triggers', who.auth, githubCommitBody(account.id, { automationId: 'auto_replicas' }));
  expect(created.status).toBe(201);
  expect((await call(a, 'GET', `/v1/triggers/${created.body.id}`, who.auth)).body).toMatchObject({ id: created.body.id, status: 'active' });
  const [row] = await database.sql<
    { composio_trigger_id: string }[]
  >`select composio_trigger_id from triggers where id = ${created.body.id}`;
  return { id: created.body.id, composioTriggerId: row!.composio_trigger_id };
}

/** Composio delivers one commit event of the trigger, to A. */
async function fire(composioTriggerId: string) {
  const delivery = await sim.controls.fireTrigger(composioTriggerId, { id: 'c0ffee', message: 'Fix the flux capacitor', author: 'ada' });
  expect(delivery).toMatchObject({ ok: true, status: 200, url: `${a.url}/v1/webhooks/composio` });
  return delivery;
}

/** Requests `path` on `broker` until it is answered `status` (for at most 5 s); when it first was. */
async function firstAnswered(broker: BrokerProcess, path: string, who: Registered, status: number): Promise<number> {
  const deadline = performance.now() + 5_000;
  for (;;) {
    const answer = await call(broker, 'GET', path, who.auth);
    if (answer.status === status) return answer.at;
    if (performance.now() > deadline) throw new Error(`${path} still answered ${answer.status}`);
  }
}

describe('background jobs on two processes', () => {
  /** Two sessions of their own, as two broker processes have. */
  let first: postgres.Sql;
  let second: postgres.Sql;
  beforeAll(() => {
    first = postgres(database.url, { max: 1, onnotice: () => {} });
    second = postgres(database.url, { max: 1, onnotice: () => {} });
  });
  afterAll(async () => {
    await Promise.all([first.end({ timeout: 1 }), second.end({ timeout: 1 })]);
  });

  const horizon = () => new Date(Date.now() - 7 * 86_400_000);

  /** `count` events received 30 days ago for a new installation; returns its id. */
  async function expiredEvents(count: number): Promise<string> {
    const { installationId } = await registerOver(a.url);
    await database.sql`
      insert into events (installation_id, position, id, type, received_at, data)
      select ${installationId}, g, ${`old_${randomUUID()}_`} || g, 'trigger.event', now() - interval '30 days', '{}'::jsonb
        from generate_series(1, ${count}) g`;
    await database.sql`update installations set last_event_position = ${count} where id = ${installationId}`;
    return installationId;
  }

  /**
   * Holds the installation's events locked, so a retention run that has started deleting waits
   * (holding its advisory lock) until `release()`.
   */
  async function holdEvents(installationId: string) {
    const holder = await database.sql.reserve();
    await holder`begin`;
    await holder`select 1 from events where installation_id = ${installationId} for update`;
    return {
      async release() {
        await holder`commit`;
        holder.release();
      },
    };
  }

  async function retentionWaitingOnLock(): Promise<number> {
    let pid = 0;
    await until(
      async () => {
        const rows = await database.sql<{ pid: number }[]>`
        select a.pid from pg_stat_activity a
         where a.datname = current_database() and a.wait_event_type = 'Lock' and a.query like '%delete from events%'
           and exists (select 1 from pg_locks l where l.pid = a.pid and l.locktype = 'advisory' and l.granted)`;
        pid = rows[0]?.pid ?? 0;
        return pid !== 0;
      },
      10_000,
      'a retention run holding the lock and waiting',
    );
    return pid;
  }

  it('runs retention on one process at a time: the other skips at once', async () => {
    const installationId = await expiredEvents(40);
    const held = await holdEvents(installationId);
    let running: Promise<{ ran: boolean; removed: number }>;
    try {
      running = removeExpiredEvents(first, { horizon: horizon() });
      await retentionWaitingOnLock();

      const started = performance.now();
      expect(await removeExpiredEvents(second, { horizon: horizon() })).toEqual({ ran: false, removed: 0 });
      expect(performance.now() - started).toBeLessThan(1000);
    } finally {
      await held.release();
    }
    expect(await running).toEqual({ ran: true, removed: 40 });
    expect((await database.sql`select count(*)::int as n from events where installation_id = ${installationId}`)[0]!.n).toBe(0);
    // Free again once the run is over.
    expect(await removeExpiredEvents(second, { horizon: horizon() })).toEqual({ ran: true, removed: 0 });
  });

  it('lets another process run when the one running it dies (its transaction, and so its lock, ends)', async () => {
    const installationId = await expiredEvents(25);
    const held = await holdEvents(installationId);
    try {
      const dying = removeExpiredEvents(first, { horizon: horizon() }).catch((error: unknown) => error);
      const pid = await retentionWaitingOnLock();
      await database.sql`select pg_terminate_backend(${pid})`;
      const settled = await Promise.race([dying, new Promise((resolve) => setTimeout(resolve, 5000, 'still running'))]);
      expect(settled).toBeInstanceOf(Error);
    } finally {
      await held.release();
    }
    expect(await removeExpiredEvents(second, { horizon: horizon() })).toEqual({ ran: true, removed: 25 });
  });
});
