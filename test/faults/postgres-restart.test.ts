import { randomUUID } from 'node:crypto';
import type postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/database.js';
import { createLogger } from '../../src/logger.js';
import { BROKER_ENV, insertTrigger, signed, type TestTrigger, triggerMessage } from '../events/helpers.js';
import type { BrokerProcess } from '../support/broker-process.js';
import { type CutPair, startCutPair } from '../support/cut-pair.js';
import { drainOver, metricValue, type Registered, registerOver, until } from '../support/http.js';
import type { TcpProxy } from '../support/tcp-proxy.js';

/**
 * Postgres restarted under a load of signed webhooks, with two broker processes on it: A (under
 * test, taking the load and holding the long polls) and B (another replica). A reaches Postgres
 * through a proxy the test cuts just before the restart and restores a moment after it: in
 * between, with A holding no connection at all — so certainly no LISTEN — B commits an event for
 * a poll waiting on A, and its notification is lost to A. Proves that A reconnects, listens
 * again, answers that poll and another that waited across the restart, and delivers every
 * webhook it answered 200 exactly once.
 *
 * The brokers reconnect with a capped backoff (`reconnectBackoff`): with postgres.js's default,
 * which grows with every failed attempt of a pool to 10–20 s, A's queries would stall that long
 * after Postgres is back (see the test at the end).
 */

const METRICS_TOKEN = 'metrics-token-postgres-restart';
const logger = createLogger('silent');

let pair: CutPair;
/** The test's own connection. */
let db: postgres.Sql;
/** A's way to Postgres. */
let proxy: TcpProxy;
let a: BrokerProcess;
let b: BrokerProcess;

beforeAll(async () => {
  pair = await startCutPair('pg-restart', { ...BROKER_ENV, QUOTA_STANDARD: '1000000', METRICS_TOKEN });
  ({ db, proxy, a, b } = pair);
}, 60_000);

afterAll(() => pair?.close(), 60_000);

interface Sent {
  id: string;
  status: number | null;
  outcome?: string;
}

async function post(url: string, trigger: TestTrigger, data: Record<string, unknown>, id?: string): Promise<Sent> {
  const webhook = signed(triggerMessage(trigger, data), id ? { id } : {});
  try {
    const response = await fetch(`${url}/v1/webhooks/composio`, { method: 'POST', headers: webhook.headers, body: webhook.body });
    const body = (await response.json().catch(() => ({}))) as { outcome?: string };
    return { id: webhook.id, status: response.status, outcome: body.outcome };
  } catch {
    return { id: webhook.id, status: null };
  }
}

/** Posts the same event to `url` until it is answered 200 (B's first requests after the restart may fail). */
async function postUntilAccepted(url: string, trigger: TestTrigger, data: Record<string, unknown>): Promise<{ id: string; at: number }> {
  const id = `msg_${randomUUID()}`;
  const deadline = Date.now() + 15_000;
  for (;;) {
    const sent = await post(url, trigger, data, id);
    if (sent.status === 200) {
      expect(['accepted', 'duplicate']).toContain(sent.outcome);
      return { id, at: performance.now() };
    }
    if (Date.now() > deadline) throw new Error(`webhook to ${url} not accepted: ${sent.status}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** A long poll; never rejects (a failure is status 0), so a test failing early leaves nothing unhandled. */
function longPoll(
  url: string,
  who: Registered,
): Promise<{ status: number; body: { events: Array<{ id: string }>; cursor: string }; at: number }> {
  return fetch(`${url}/v1/events?wait=25`, { headers: who.auth }).then(
    async (response) => ({
      status: response.status,
      body: (await response.json()) as { events: Array<{ id: string }>; cursor: string },
      at: performance.now(),
    }),
    () => ({ status: 0, body: { events: [], cursor: '' }, at: performance.now() }),
  );
}

async function health(url: string): Promise<{ status: number; body: unknown } | null> {
  try {
    const response = await fetch(`${url}/health`);
    return { status: response.status, body: await response.json() };
  } catch {
    return null;
  }
}

describe('Postgres restarted under load', () => {
  it('reconnects, listens again, wakes polls that waited across it and loses no accepted webhook', async () => {
    const [load, w1, w2] = await Promise.all([registerOver(a.url), registerOver(a.url), registerOver(a.url)]);
    const loadTrigger = await insertTrigger({ sql: db }, load.installationId);
    const w1Trigger = await insertTrigger({ sql: db }, w1.installationId);
    const w2Trigger = await insertTrigger({ sql: db }, w2.installationId);

    // Two polls on A that will wait across the restart.
    const p1 = longPoll(a.url, w1);
    const p2 = longPoll(a.url, w2);
    await until(
      async () => {
        const response = await fetch(`${a.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
        return metricValue(await response.text(), 'omb_long_polls_waiting') === 2;
      },
      10_000,
      'two polls waiting on A',
    );

    // The load: four clients posting webhooks to A as fast as it answers.
    const sent: Sent[] = [];
    let loading = true;
    const worker = async () => {
      while (loading && sent.length < 5000) {
        const result = post(a.url, loadTrigger, { n: sent.length });
        const entry: Sent = { id: '', status: null };
        sent.push(entry);
        Object.assign(entry, await result);
      }
    };
    const workers = Promise.all([worker(), worker(), worker(), worker()]);
    const accepted = () => sent.filter((s) => s.status === 200).length;
    const failed = () => sent.filter((s) => s.id !== '' && s.status !== 200).length;
    await until(() => accepted() >= 50, 10_000, 'the load under way');

    // Postgres restarts; A loses its connections first and gets none until the test lets it.
    await proxy.down();
    await pair.stopPostgres();
    const downAt = accepted();
    await until(async () => (await health(a.url))?.status === 503, 10_000, 'A reporting the database down');
    expect(await health(a.url)).toEqual({ status: 503, body: { error: 'the database is not reachable', code: 'database_unavailable' } });
    // Webhooks fail meanwhile (Composio would deliver those again).
    await until(() => failed() >= 3, 10_000, 'webhooks failing while Postgres is down');

    // Postgres is back, but not yet for A: B commits an event for W2, whose notification A cannot hear.
    await pair.startPostgres();
    const w2Event = await postUntilAccepted(b.url, w2Trigger, { missed: 'notification' });
    expect((await health(a.url))?.status).toBe(503);

    await proxy.up();
    const resumedAt = performance.now();
    await until(async () => (await health(a.url))?.status === 200, 15_000, 'A healthy again');

    // W2's poll waited across the restart and hears of the event whose notification it missed,
    // long before its own wait (25 s) would have ended.
    const second = await p2;
    expect(second.status).toBe(200);
    expect(second.body.events.map((e) => e.id)).toEqual([w2Event.id]);
    expect(second.at - resumedAt).toBeLessThan(5000);

    // A listens again: an event B commits now wakes W1's poll, which also waited across the restart, at once.
    const w1Event = await postUntilAccepted(b.url, w1Trigger, { after: 'restart' });
    const first = await p1;
    expect(first.status).toBe(200);
    expect(first.body.events.map((e) => e.id)).toEqual([w1Event.id]);
    expect(first.at - w1Event.at).toBeLessThan(1000);

    // The load kept going after the restart.
    await until(() => accepted() >= downAt + 50, 15_000, 'webhooks accepted again');
    loading = false;
    await workers;

    const answered = sent.filter((s) => s.status === 200);
    for (const s of answered) expect(['accepted', 'duplicate']).toContain(s.outcome);
    const received = await drainOver(a.url, load);
    expect(new Set(received).size, 'no event delivered twice').toBe(received.length);
    const receivedIds = new Set(received);
    const missing = answered.filter((s) => !receivedIds.has(s.id)).map((s) => s.id);
    expect(missing, 'every webhook answered 200 is delivered').toEqual([]);
    // Some that failed may have committed before their answer was lost; nothing else arrives.
    const sentIds = new Set(sent.map((s) => s.id));
    expect(received.every((id) => sentIds.has(id))).toBe(true);
    expect(failed()).toBeGreaterThanOrEqual(3);
  }, 60_000);

  it('retries a lost database connection within 2 s, however many attempts failed during the outage', async () => {
    const database = openDatabase({ url: pair.postgres().url, poolSize: 1, logger });
    try {
      const backoff: unknown = database.sql.options.backoff;
      const seconds = typeof backoff === 'function' ? (backoff as (attempt: number) => number)(30) : Number(backoff);
      expect(seconds).toBeLessThanOrEqual(2);
    } finally {
      await database.close();
    }
  });
});
