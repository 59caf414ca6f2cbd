import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BROKER_ENV, insertTrigger, signed, type TestTrigger, triggerMessage } from '../events/helpers.js';
import { type BrokerProcess, startBroker } from '../support/broker-process.js';
import { metricValue, type RawAnswer, type Registered, rawRequest, registerOver, until } from '../support/http.js';
import { type ReplicatedPostgres, startReplicatedPostgres } from '../support/replication.js';

/**
 * A managed Postgres failing over under load: the primary dies (`kill -9`), its endpoint refuses
 * connections for 8 s, a synchronous standby is promoted and the endpoint then leads to it. Two
 * broker processes (A and B) on the endpoint take a signed webhook every ~20 ms (alternately),
 * a consumer long-polls both, `/health` is asked every 250 ms. Measured and held to:
 * - nothing answered 2xx is lost, repeated or reordered (RPO 0 with a synchronous standby);
 * - every answer meanwhile is 2xx or 503 with `retry-after`: no 500, no socket error, no hang;
 * - no answer waits much longer than DATABASE_TIMEOUT_MS (the pool's wait is bounded by it), and
 *   `/health` answers each time within HEALTH_MS;
 * - each broker serves again within SERVING_AGAIN_MS of the endpoint coming back;
 * - a webhook on one broker wakes a poll held on the other again within WAKE_AGAIN_MS of it.
 * The figures are printed (`failover figures`) whether the checks pass or not.
 */

/**
 * Four DATABASE_TIMEOUT_MS: an answer held for the outage (8 s) and one the pool bounds (2 s, plus
 * ANSWER_MARGIN_MS) fall on either side of the answer bounds below.
 */
const OUTAGE_MS = 8_000;
const DATABASE_TIMEOUT_MS = 2_000;
/** Past DATABASE_TIMEOUT_MS, what a webhook's answer may still take: its own statements, a busy machine. */
const ANSWER_MARGIN_MS = 1_500;
const HEALTH_MS = 1_500;
const SERVING_AGAIN_MS = 5_000;
/**
 * About 2 s for the brokers to reach the new primary and listen again, plus the probe's own
 * round trips (a poll read and seen held, a webhook accepted) on brokers whose pools are still
 * reconnecting, on a busy machine.
 */
const WAKE_AGAIN_MS = 5_000;
/**
 * A probe poll answered this soon after its event's webhook was answered on the other broker was
 * woken by the notification (or by the poller listening again, which is as good). It waits far
 * longer (PROBE_WAIT_SECONDS), so its own end is never taken for a wake-up.
 */
const PROMPT_WAKE_MS = 1_500;
const PROBE_WAIT_SECONDS = 20;
/** How long after the endpoint is back wake-ups are looked for. */
const WAKE_SEARCH_MS = 20_000;
const WEBHOOK_EVERY_MS = 20;
const HEALTH_EVERY_MS = 250;
/** A request not answered within this long counts as hung (it is abandoned). */
const HUNG_MS = 30_000;
const METRICS_TOKEN = 'metrics-token-failover';

let replicated: ReplicatedPostgres;
/** The test's own connection, to the first primary (before the failover). */
let db: postgres.Sql;
let a: BrokerProcess;
let b: BrokerProcess;

beforeAll(async () => {
  replicated = await startReplicatedPostgres({ synchronous: true });
  db = postgres(replicated.primaryUrl, { max: 1, onnotice: () => {} });
  const env = {
    ...BROKER_ENV,
    DATABASE_URL: replicated.url,
    DATABASE_TIMEOUT_MS: String(DATABASE_TIMEOUT_MS),
    QUOTA_STANDARD: '1000000',
    EVENT_REQUESTS_PER_MINUTE: '1000000',
    METRICS_TOKEN,
  };
  [a, b] = await Promise.all([startBroker(env), startBroker(env)]);
}, 90_000);

afterAll(async () => {
  await Promise.all([a?.stop('SIGKILL'), b?.stop('SIGKILL')]);
  await db?.end({ timeout: 0 });
  await replicated?.stop();
}, 60_000);

interface Answer {
  status: number;
  retryAfter?: string;
  body?: string;
  json?: any;
  /** A socket error, or `hung` when abandoned after HUNG_MS. */
  error?: string;
  startedAt: number;
  answeredAt: number;
  ms: number;
}

/** One request on a fresh connection; never rejects (an error is status 0 and `error`). */
async function ask(
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: string; signal?: AbortSignal } = {},
): Promise<Answer> {
  const startedAt = Date.now();
  const hung = AbortSignal.timeout(HUNG_MS);
  const signal = options.signal ? AbortSignal.any([options.signal, hung]) : hung;
  const done = (status: number, extra: Partial<Answer>): Answer => {
    const answeredAt = Date.now();
    return { status, startedAt, answeredAt, ms: answeredAt - startedAt, ...extra };
  };
  try {
    const answer: RawAnswer = await rawRequest(url, { ...options, signal });
    const retryAfter = answer.headers['retry-after'];
    return done(answer.status, { body: answer.body, json: answer.json, ...(typeof retryAfter === 'string' ? { retryAfter } : {}) });
  } catch (error) {
    return done(0, { error: hung.aborted ? 'hung' : ((error as NodeJS.ErrnoException).code ?? String(error)) });
  }
}

interface Webhook {
  seq: number;
  broker: 'A' | 'B';
  id: string;
  answer?: Answer;
}

function postWebhook(broker: BrokerProcess, trigger: TestTrigger, data: Record<string, unknown>, id = `msg_${randomUUID()}`) {
  const webhook = signed(triggerMessage(trigger, data), { id });
  return ask(`${broker.url}/v1/webhooks/composio`, { method: 'POST', headers: webhook.headers, body: webhook.body });
}

/** Polls held on `broker` now (`omb_long_polls_waiting`); undefined when it could not say. */
async function waitingPolls(broker: BrokerProcess): Promise<number | undefined> {
  const answer = await ask(`${broker.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
  return answer.status === 200 ? metricValue(answer.body ?? '', 'omb_long_polls_waiting') : undefined;
}

/**
 * How soon after `since` a webhook accepted by `sender` wakes a poll held on `poller` (the
 * notification crossing processes through Postgres): rounds of one poll held on `poller` (seen
 * held in its gauge, so the event cannot have been read by the poll's first look) and one
 * webhook to `sender`, until the poll answers within PROMPT_WAKE_MS of the webhook's answer.
 * `afterEndpointUpMs` is undefined when that did not happen within WAKE_SEARCH_MS; `rounds` says
 * how each round ended.
 */
async function firstCrossWake(poller: BrokerProcess, sender: BrokerProcess, who: Registered, trigger: TestTrigger, since: number) {
  let cursor: string | undefined;
  const rounds: string[] = [];
  const at = () => `at +${Date.now() - since} ms`;
  while (Date.now() < since + WAKE_SEARCH_MS) {
    const baseline = await waitingPolls(poller);
    if (baseline === undefined) {
      rounds.push(`no metrics ${at()}`);
      await sleep(50);
      continue;
    }
    const query = new URLSearchParams({ wait: String(PROBE_WAIT_SECONDS), ...(cursor ? { cursor } : {}) });
    let settled = false;
    const poll = ask(`${poller.url}/v1/events?${query}`, { headers: who.auth }).finally(() => {
      settled = true;
    });
    const held = await until(async () => settled || ((await waitingPolls(poller)) ?? -1) > baseline, 15_000).then(
      () => !settled,
      () => false,
    );
    if (!held) {
      const early = await poll;
      if (early.status === 200) cursor = early.json.cursor;
      rounds.push(`poll not held: ${early.error ?? early.status} after ${early.ms} ms, ${at()}`);
      if (early.status !== 200) await sleep(50);
      continue;
    }
    const heldAt = at();
    let accepted: Answer | undefined;
    const id = `msg_wake_${randomUUID()}`;
    while (!settled && accepted === undefined) {
      const answer = await postWebhook(sender, trigger, { probe: rounds.length }, id);
      if (answer.status === 200) accepted = answer;
      else await sleep(50);
    }
    const woken = await poll;
    if (woken.status === 200) cursor = woken.json.cursor;
    const events = (woken.json?.events ?? []) as Array<{ id: string }>;
    if (woken.status !== 200 || accepted === undefined || !events.some((event) => event.id === id)) {
      rounds.push(`held ${heldAt}, answered ${woken.error ?? woken.status} ${accepted ? 'without' : 'before'} the webhook ${at()}`);
      continue;
    }
    const latencyMs = woken.answeredAt - accepted.answeredAt;
    rounds.push(`held ${heldAt}, webhook answered after ${accepted.ms} ms, woken ${latencyMs} ms after it ${at()}`);
    if (latencyMs <= PROMPT_WAKE_MS) return { afterEndpointUpMs: woken.answeredAt - since, latencyMs, rounds };
  }
  return { afterEndpointUpMs: undefined, latencyMs: undefined, rounds };
}

describe('a managed Postgres failing over to its synchronous standby', () => {
  it('loses nothing answered, answers only 2xx or 503 meanwhile, and serves and wakes again soon after', async () => {
    const [load, wakeOnA, wakeOnB] = await Promise.all([registerOver(a.url), registerOver(a.url), registerOver(b.url)]);
    const loadTrigger = await insertTrigger({ sql: db }, load.installationId);
    const wakeOnATrigger = await insertTrigger({ sql: db }, wakeOnA.installationId);
    const wakeOnBTrigger = await insertTrigger({ sql: db }, wakeOnB.installationId);
    const brokers = { A: a, B: b };

    // The webhooks: one every ~20 ms, alternately to A and B, each not waiting for the last.
    const webhooks: Webhook[] = [];
    const inFlight = new Set<Promise<void>>();
    const send = () => {
      const seq = webhooks.length;
      const broker = seq % 2 === 0 ? 'A' : 'B';
      const webhook: Webhook = { seq, broker, id: `msg_seq_${seq}_${randomUUID()}` };
      webhooks.push(webhook);
      const sent = postWebhook(brokers[broker], loadTrigger, { seq }, webhook.id).then((answer) => {
        webhook.answer = answer;
      });
      inFlight.add(sent);
      void sent.finally(() => inFlight.delete(sent));
    };
    const loadTimer = setInterval(send, WEBHOOK_EVERY_MS);
    const accepted = () => webhooks.filter((w) => w.answer?.status === 200);

    // The consumer: long polls on A and B in turn, acknowledging as it goes. It pauses while the
    // wake-ups are measured (they count the polls each broker holds).
    const received: string[] = [];
    const consumerAnswers: Answer[] = [];
    let consuming = true;
    let paused: { resume: Promise<void>; release: () => void } | undefined;
    let hangUp = new AbortController();
    let cursor: string | undefined;
    const consumer = (async () => {
      for (let turn = 0; consuming; turn += 1) {
        if (paused) {
          await paused.resume;
          continue;
        }
        const broker = turn % 2 === 0 ? a : b;
        const query = new URLSearchParams({ limit: '100', wait: '5', ...(cursor ? { cursor } : {}) });
        const signal = hangUp.signal;
        const answer = await ask(`${broker.url}/v1/events?${query}`, { headers: load.auth, signal });
        if (signal.aborted) continue;
        consumerAnswers.push(answer);
        if (answer.status === 200) {
          received.push(...(answer.json.events as Array<{ id: string }>).map((event) => event.id));
          cursor = answer.json.cursor;
        } else {
          await sleep(100);
        }
      }
    })();
    const pauseConsumer = () => {
      let release!: () => void;
      const resume = new Promise<void>((resolve) => {
        release = resolve;
      });
      paused = { resume, release };
      // The poll it holds now is given up: the broker stops holding it.
      hangUp.abort();
      hangUp = new AbortController();
    };
    const resumeConsumer = () => {
      const current = paused;
      paused = undefined;
      current?.release();
    };

    // `/health` on each broker every 250 ms.
    const healthAnswers: Array<Answer & { broker: 'A' | 'B' }> = [];
    let checkingHealth = true;
    const healthChecks = (['A', 'B'] as const).map(async (name) => {
      while (checkingHealth) {
        const answer = await ask(`${brokers[name].url}/health`);
        healthAnswers.push({ ...answer, broker: name });
        await sleep(Math.max(0, HEALTH_EVERY_MS - answer.ms));
      }
    });

    const startedAt = Date.now();
    await until(() => accepted().length >= 50, 20_000, 'the load under way');
    const times = await replicated.failover({ outageMs: OUTAGE_MS });
    const { killedAt, endpointUpAt } = times;

    // Back: how soon each broker serves a webhook and wakes a poll held on the other.
    pauseConsumer();
    /** The first webhook sent to the broker since the kill that it answered 200. */
    const servingAgain = (name: 'A' | 'B') =>
      webhooks
        .filter((w) => w.broker === name && w.answer?.status === 200 && w.answer.startedAt >= killedAt)
        .map((w) => w.answer!)
        .sort((x, y) => x.answeredAt - y.answeredAt)[0];
    const [wakeBtoA, wakeAtoB] = await Promise.all([
      firstCrossWake(a, b, wakeOnA, wakeOnATrigger, endpointUpAt),
      firstCrossWake(b, a, wakeOnB, wakeOnBTrigger, endpointUpAt),
    ]);
    await until(() => servingAgain('A') !== undefined && servingAgain('B') !== undefined, 20_000).catch(() => {});
    resumeConsumer();

    // A while longer under load, then everything accepted is read.
    const acceptedBefore = accepted().length;
    await until(() => accepted().length >= acceptedBefore + 50, 20_000).catch(() => {});
    clearInterval(loadTimer);
    await Promise.all(inFlight);
    const acceptedIds = accepted().map((w) => w.id);
    const receivedSoFar = () => new Set(received);
    await until(() => acceptedIds.every((id) => receivedSoFar().has(id)), 30_000, 'every accepted webhook delivered').catch(() => {});
    consuming = false;
    await consumer;
    checkingHealth = false;
    await Promise.all(healthChecks);
    const rest = await ask(`${a.url}/v1/events?${new URLSearchParams({ limit: '100', wait: '0', ...(cursor ? { cursor } : {}) })}`, {
      headers: load.auth,
    });

    // The figures.
    const answers = webhooks.map((w) => w.answer!);
    const during = (answer: Answer) => answer.answeredAt >= killedAt && answer.startedAt <= endpointUpAt + 5_000;
    const byStatus = (list: Answer[]) =>
      list.reduce<Record<string, number>>((counts, answer) => {
        const key = answer.error ? `error:${answer.error}` : String(answer.status);
        counts[key] = (counts[key] ?? 0) + 1;
        return counts;
      }, {});
    const longest = (list: Answer[]) => Math.max(0, ...list.map((answer) => answer.ms));
    const unacceptable = (answer: Answer) => !(answer.status === 200 || (answer.status === 503 && answer.retryAfter !== undefined));
    const servedA = servingAgain('A');
    const servedB = servingAgain('B');
    const position = new Map(received.map((id, index) => [id, index]));
    const missing = acceptedIds.filter((id) => !position.has(id));
    const sentIds = new Set(webhooks.map((w) => w.id));
    const foreign = received.filter((id) => !sentIds.has(id));
    // In order: a webhook answered before another was sent comes before it in the queue.
    const byAnswer = accepted().sort((x, y) => x.answer!.answeredAt - y.answer!.answeredAt);
    const bySending = accepted().sort((x, y) => x.answer!.startedAt - y.answer!.startedAt);
    let outOfOrder = 0;
    let latestPosition = -1;
    let next = 0;
    for (const webhook of bySending) {
      while (next < byAnswer.length && byAnswer[next]!.answer!.answeredAt < webhook.answer!.startedAt) {
        latestPosition = Math.max(latestPosition, position.get(byAnswer[next]!.id) ?? -1);
        next += 1;
      }
      if ((position.get(webhook.id) ?? Number.POSITIVE_INFINITY) < latestPosition) outOfOrder += 1;
    }
    const seqOf = (id: string) => Number(/^msg_seq_(\d+)_/.exec(id)?.[1]);
    const seqInversions = received.filter((id, index) => index > 0 && seqOf(id) < seqOf(received[index - 1]!)).length;
    const figures = {
      testMs: Date.now() - startedAt,
      failover: { promotedAfterKillMs: times.promotedAt - killedAt, endpointUpAfterKillMs: endpointUpAt - killedAt },
      webhooks: {
        sent: webhooks.length,
        accepted: acceptedIds.length,
        statuses: byStatus(answers),
        statusesDuringOutage: byStatus(answers.filter(during)),
        unacceptable: answers.filter(unacceptable).length,
        longestMs: longest(answers),
        longestDuringOutageMs: longest(answers.filter(during)),
        over5s: answers.filter((answer) => answer.ms > 5_000).length,
        overBoundMs: answers.filter((answer) => answer.ms > DATABASE_TIMEOUT_MS + ANSWER_MARGIN_MS).length,
        slowest: [...answers]
          .sort((x, y) => y.ms - x.ms)
          .slice(0, 5)
          .map((answer) => ({ sentAfterKillMs: answer.startedAt - killedAt, ms: answer.ms, status: answer.status })),
      },
      delivery: {
        received: received.length,
        distinct: new Set(received).size,
        missing: missing.length,
        foreign: foreign.length,
        outOfOrder,
        seqInversions,
        restAfterDrain: rest.json?.events?.length,
      },
      health: {
        checks: healthAnswers.length,
        statuses: byStatus(healthAnswers),
        longestMs: longest(healthAnswers),
        overBound: healthAnswers.filter((answer) => answer.ms > HEALTH_MS).length,
      },
      consumer: { polls: consumerAnswers.length, statuses: byStatus(consumerAnswers), longestMs: longest(consumerAnswers) },
      servingAgain: {
        A: servedA && { afterKillMs: servedA.answeredAt - killedAt, afterEndpointUpMs: servedA.answeredAt - endpointUpAt },
        B: servedB && { afterKillMs: servedB.answeredAt - killedAt, afterEndpointUpMs: servedB.answeredAt - endpointUpAt },
      },
      wakeAgain: { BtoA: wakeBtoA, AtoB: wakeAtoB },
    };
    console.log(`failover figures ${JSON.stringify(figures, null, 2)}`);

    // RPO 0: every webhook answered 2xx is delivered, once, in order; nothing else is.
    expect.soft(missing, 'every webhook answered 2xx is delivered').toEqual([]);
    expect.soft(figures.delivery.distinct, 'none delivered twice').toBe(received.length);
    expect.soft(foreign, 'nothing delivered that was not sent').toEqual([]);
    expect.soft(outOfOrder, 'delivered in the order accepted').toBe(0);
    expect.soft(rest.status).toBe(200);
    expect.soft(figures.delivery.restAfterDrain).toBe(0);
    for (const webhook of accepted()) expect.soft(webhook.answer!.json).toEqual({ outcome: 'accepted' });
    // Meanwhile only 2xx or 503 with `retry-after`: no 500, no socket error, no hang.
    expect.soft(answers.filter(unacceptable), 'webhook answers other than 200 or 503 with retry-after').toEqual([]);
    expect.soft(consumerAnswers.filter(unacceptable), 'poll answers other than 200 or 503 with retry-after').toEqual([]);
    expect.soft(healthAnswers.filter(unacceptable), 'health answers other than 200 or 503 with retry-after').toEqual([]);
    // Bounded waits.
    expect.soft(figures.webhooks.longestMs, 'the longest webhook answer').toBeLessThanOrEqual(DATABASE_TIMEOUT_MS + ANSWER_MARGIN_MS);
    expect.soft(figures.health.longestMs, 'the longest /health answer').toBeLessThanOrEqual(HEALTH_MS);
    // Serving and waking again soon after the endpoint is back.
    expect
      .soft(figures.servingAgain.A?.afterEndpointUpMs ?? Number.POSITIVE_INFINITY, 'A serving again')
      .toBeLessThanOrEqual(SERVING_AGAIN_MS);
    expect
      .soft(figures.servingAgain.B?.afterEndpointUpMs ?? Number.POSITIVE_INFINITY, 'B serving again')
      .toBeLessThanOrEqual(SERVING_AGAIN_MS);
    expect
      .soft(wakeBtoA.afterEndpointUpMs ?? Number.POSITIVE_INFINITY, 'a webhook on B waking a poll on A')
      .toBeLessThanOrEqual(WAKE_AGAIN_MS);
    expect
      .soft(wakeAtoB.afterEndpointUpMs ?? Number.POSITIVE_INFINITY, 'a webhook on A waking a poll on B')
      .toBeLessThanOrEqual(WAKE_AGAIN_MS);
  }, 150_000);
});
