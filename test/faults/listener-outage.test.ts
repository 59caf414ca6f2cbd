import { randomUUID } from 'node:crypto';
import type postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BROKER_ENV, insertTrigger, signed, type TestTrigger, triggerMessage } from '../events/helpers.js';
import type { BrokerProcess } from '../support/broker-process.js';
import { type CutPair, startCutPair } from '../support/cut-pair.js';
import { metricValue, type Registered, registerOver, until } from '../support/http.js';
import type { TcpProxy } from '../support/tcp-proxy.js';

/**
 * One broker process loses its database for 6 s while another keeps it: A reaches Postgres
 * through a proxy the test cuts (its connections close, new ones are refused), B directly. Proves
 * that A listens again within about a second of the database answering, in both directions: a
 * webhook B ingests wakes a poll on A, one A ingests wakes a poll on B, and a poll that waited on
 * A across the outage gets the event B committed meanwhile (its notification lost to A) as soon as
 * A listens again, not at the end of its wait.
 *
 * The cut holds two of A's heartbeats (one every HEARTBEAT_MS from its start, 5 s here): a
 * listener that counted on its heartbeat to listen again would stay deaf until the next one,
 * 4.75 s after the database returns, past BOUND_MS.
 */

const METRICS_TOKEN = 'metrics-token-listener-outage';
const HEARTBEAT_MS = 5_000;
/** From 0.85 to 2.05 heartbeats after A started: over its first two. */
const CUT_AFTER_START_MS = 0.85 * HEARTBEAT_MS;
const OUTAGE_MS = 1.2 * HEARTBEAT_MS;
/** From the database's return: A's pool and its LISTEN come back within about a second or two each. */
const BOUND_MS = 3_000;

let pair: CutPair;
let db: postgres.Sql;
/** A's way to Postgres. */
let proxy: TcpProxy;
let a: BrokerProcess;
let b: BrokerProcess;
/** When A's listener started its heartbeat, to within the time A takes to say it listens. */
let aStartedAt: number;

beforeAll(async () => {
  pair = await startCutPair('listener-outage', { ...BROKER_ENV, METRICS_TOKEN, LISTENER_HEARTBEAT_MS: String(HEARTBEAT_MS) });
  ({ db, proxy, a, b, aListeningAt: aStartedAt } = pair);
}, 60_000);

afterAll(() => pair?.close(), 60_000);

const sleepUntil = (at: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, at - performance.now())));

/** Posts one event to `url` until it is answered 200 (A refuses while its database is away). */
async function postUntilAccepted(url: string, trigger: TestTrigger, data: Record<string, unknown>): Promise<{ id: string; at: number }> {
  const webhook = signed(triggerMessage(trigger, data), { id: `msg_${randomUUID()}` });
  const deadline = Date.now() + 15_000;
  for (;;) {
    const response = await fetch(`${url}/v1/webhooks/composio`, { method: 'POST', headers: webhook.headers, body: webhook.body }).catch(
      () => null,
    );
    if (response?.status === 200) return { id: webhook.id, at: performance.now() };
    if (Date.now() > deadline) throw new Error(`webhook to ${url} not accepted: ${response?.status}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** A long poll; never rejects (a failure is status 0), so a test failing early leaves nothing unhandled. */
function longPoll(url: string, who: Registered): Promise<{ status: number; ids: string[]; at: number }> {
  return fetch(`${url}/v1/events?wait=25`, { headers: who.auth }).then(
    async (response) => {
      const body = (await response.json()) as { events?: Array<{ id: string }> };
      return { status: response.status, ids: (body.events ?? []).map((e) => e.id), at: performance.now() };
    },
    () => ({ status: 0, ids: [], at: performance.now() }),
  );
}

async function pollsWaiting(url: string): Promise<number | undefined> {
  const response = await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } }).catch(() => null);
  return response?.ok ? metricValue(await response.text(), 'omb_long_polls_waiting') : undefined;
}

describe('a broker whose database went away', () => {
  it('listens again within about a second of the database answering, and hears what it missed', async () => {
    const [held, onA, onB] = await Promise.all([registerOver(a.url), registerOver(a.url), registerOver(a.url)]);
    const heldTrigger = await insertTrigger({ sql: db }, held.installationId);
    const onATrigger = await insertTrigger({ sql: db }, onA.installationId);
    const onBTrigger = await insertTrigger({ sql: db }, onB.installationId);

    const heldPoll = longPoll(a.url, held);
    await until(async () => (await pollsWaiting(a.url)) === 1, 10_000, 'a poll waiting on A');

    await sleepUntil(aStartedAt + CUT_AFTER_START_MS);
    await proxy.down();
    const downAt = performance.now();
    // While A is cut off: B commits an event for the poll held on A, which A cannot hear of.
    const missed = await postUntilAccepted(b.url, heldTrigger, { missed: 'notification' });
    const bPoll = longPoll(b.url, onB);
    await until(async () => (await pollsWaiting(b.url)) === 1, 10_000, 'a poll waiting on B');
    await sleepUntil(downAt + OUTAGE_MS);
    expect((await fetch(`${a.url}/health`)).status).toBe(503);

    await proxy.up();
    const upAt = performance.now();

    // A to B: a webhook A ingests (once its pool answers) wakes the poll on B.
    const aToB = postUntilAccepted(a.url, onBTrigger, { direction: 'a-to-b' });

    // The poll held across the outage gets the event whose notification A missed.
    const heldAnswer = await heldPoll;
    expect(heldAnswer.status).toBe(200);
    expect(heldAnswer.ids).toEqual([missed.id]);

    // B to A: a poll on A, waiting now, is woken by a webhook B ingests.
    const aPoll = longPoll(a.url, onA);
    await until(async () => (await pollsWaiting(a.url)) === 1, 10_000, 'a new poll waiting on A');
    const bToA = await postUntilAccepted(b.url, onATrigger, { direction: 'b-to-a' });
    const aAnswer = await aPoll;
    expect(aAnswer.status).toBe(200);
    expect(aAnswer.ids).toEqual([bToA.id]);

    const aToBSent = await aToB;
    const bAnswer = await bPoll;
    expect(bAnswer.status).toBe(200);
    expect(bAnswer.ids).toEqual([aToBSent.id]);

    const figures = {
      heldPollAnswered: Math.round(heldAnswer.at - upAt),
      bToA: { answered: Math.round(aAnswer.at - upAt), afterWebhook: Math.round(aAnswer.at - bToA.at) },
      aToB: { answered: Math.round(bAnswer.at - upAt), afterWebhook: Math.round(bAnswer.at - aToBSent.at) },
    };
    console.log(`listener outage, ms after the database answered again: ${JSON.stringify(figures)}`);
    expect(figures.heldPollAnswered).toBeLessThan(BOUND_MS);
    expect(figures.bToA.answered).toBeLessThan(BOUND_MS);
    expect(figures.aToB.answered).toBeLessThan(BOUND_MS);
    // Once listening, a wake-up takes as long as a notification does.
    expect(figures.bToA.afterWebhook).toBeLessThan(1_000);
    expect(figures.aToB.afterWebhook).toBeLessThan(1_000);

    // Said once each, however many attempts the outage took.
    const output = a.output();
    expect(output.match(/event listener lost its connection/g)?.length).toBe(1);
    expect(output.match(/event listener listening again after \d+ ms/g)?.length).toBe(1);
  }, 60_000);
});
