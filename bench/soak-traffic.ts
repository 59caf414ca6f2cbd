import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { signedHeaders, triggerMessageBody } from './lib.js';

/**
 * The soak's clients (bench/soak.ts): Composio posting signed webhooks, the installations' apps
 * long-polling their queues, and the side traffic of check-ins, connector listings and health
 * checks. Everything they see is written in one `Ledger`, which the report is read from.
 */

/** One installation as the soak drives it: its token, and the trigger its webhooks are for. */
export interface SoakInstallation {
  readonly index: number;
  readonly installationId: string;
  readonly auth: { authorization: string };
  readonly composioUserId: string;
  readonly composioTriggerId: string;
  readonly connectedAccountId: string;
}

/** An app event Composio has for an installation: sent until a broker answers 2xx. */
interface PlannedEvent {
  readonly id: string;
  readonly installation: SoakInstallation;
  /** Its place in the installation's stream: the order it must be delivered in. */
  readonly seq: number;
  readonly body: string;
}

/** `Math.random` with a seed, so a run's choices (who, when, which broker) can be repeated. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** What the clients saw, by event and by request. */
export class Ledger {
  /** Event id → when a broker first answered it 2xx (ms since the run began). */
  readonly accepted = new Map<string, { installation: number; at: number }>();
  /** Event id → how many times a poll handed it over. */
  readonly deliveries = new Map<string, number>();
  /** Per installation, the stream position (`seq`) of the last event delivered. */
  private readonly lastSeq = new Map<number, number>();
  /** Webhook answered 2xx → event in a poll's answer, with the acceptance time (ms since the run began). */
  readonly latencies: Array<{ acceptedAt: number; ms: number }> = [];
  /** Events delivered before any answer said they were accepted (the answer lost, a retry pending). */
  private readonly earlyDeliveries = new Map<string, number>();
  /** Non-2xx answers (or `error`: no answer) by the kind of request, then by status. */
  readonly nonTwoXx: Record<string, Record<string, number>> = {};
  /** 200 answers to a webhook whose outcome was neither `accepted` nor `duplicate`. */
  readonly unexpectedOutcomes: Record<string, number> = {};
  duplicated = 0;
  outOfOrder = 0;
  gaps = 0;
  /** Delivered ids the soak never sent to that installation. */
  foreign = 0;
  webhookAttempts = 0;
  redeliveries = 0;
  /** Redeliveries of an accepted event that a broker answered `accepted` again (stored twice). */
  redeliveriesStoredAgain = 0;
  polls = 0;
  pollsHungUp = 0;
  acknowledgements = 0;
  sideRequests = 0;
  /** Events given up on: still refused when the drain ended. */
  abandoned = 0;

  constructor(private readonly startedAt: number) {}

  now(): number {
    return performance.now() - this.startedAt;
  }

  /** The first answer of each kind and status, as it came (its `{error, code}`), to say what was refused. */
  readonly nonTwoXxExamples: Record<string, Record<string, string>> = {};

  refused(kind: string, answer: Answer | 'error'): void {
    const status = answer === 'error' ? 'error' : String(answer.status);
    const byStatus = this.nonTwoXx[kind] ?? {};
    this.nonTwoXx[kind] = byStatus;
    byStatus[status] = (byStatus[status] ?? 0) + 1;
    const examples = this.nonTwoXxExamples[kind] ?? {};
    this.nonTwoXxExamples[kind] = examples;
    if (answer !== 'error' && examples[status] === undefined) {
      examples[status] = (typeof answer.body === 'string' ? answer.body : JSON.stringify(answer.body ?? null)).slice(0, 300);
    }
  }

  /** Every non-2xx answer by status, whatever the request. */
  nonTwoXxByStatus(): Record<string, number> {
    const total: Record<string, number> = {};
    for (const byStatus of Object.values(this.nonTwoXx)) {
      for (const [status, n] of Object.entries(byStatus)) total[status] = (total[status] ?? 0) + n;
    }
    return total;
  }

  nonTwoXxCount(): number {
    return Object.values(this.nonTwoXxByStatus()).reduce((a, b) => a + b, 0);
  }

  accept(event: PlannedEvent): void {
    if (this.accepted.has(event.id)) return;
    const at = this.now();
    this.accepted.set(event.id, { installation: event.installation.index, at });
    const deliveredAt = this.earlyDeliveries.get(event.id);
    if (deliveredAt !== undefined) {
      this.earlyDeliveries.delete(event.id);
      this.latencies.push({ acceptedAt: at, ms: Math.max(0, deliveredAt - at) });
    }
  }

  /** An event as a poll of `installation` handed it over. */
  deliver(installation: number, event: { id: string; data?: { seq?: unknown; installation?: unknown } }, sentIds: Set<string>): void {
    const at = this.now();
    const count = (this.deliveries.get(event.id) ?? 0) + 1;
    this.deliveries.set(event.id, count);
    if (!sentIds.has(event.id) || event.data?.installation !== installation) {
      this.foreign++;
      return;
    }
    if (count > 1) {
      this.duplicated++;
      return;
    }
    const seq = Number(event.data?.seq);
    const last = this.lastSeq.get(installation) ?? 0;
    if (!(seq > last)) this.outOfOrder++;
    else this.lastSeq.set(installation, seq);
    const accepted = this.accepted.get(event.id);
    if (accepted) this.latencies.push({ acceptedAt: accepted.at, ms: at - accepted.at });
    else this.earlyDeliveries.set(event.id, at);
  }

  /** Accepted events no poll has handed over yet. */
  undelivered(): number {
    let n = 0;
    for (const id of this.accepted.keys()) if (!this.deliveries.has(id)) n++;
    return n;
  }

  deliveredCount(): number {
    let n = 0;
    for (const id of this.accepted.keys()) if (this.deliveries.has(id)) n++;
    return n;
  }
}

export interface Brokers {
  /** The brokers' base URLs; each request goes to one picked at random. */
  readonly urls: readonly string[];
}

export interface Answer {
  status: number;
  headers: Headers;
  body: unknown;
}

/** One request; `error` when no answer came (refused connection, timeout, hang-up). */
async function call(
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: string; timeoutMs: number; signal?: AbortSignal },
): Promise<Answer | 'error'> {
  const timeout = AbortSignal.timeout(options.timeoutMs);
  try {
    const response = await fetch(url, {
      method: options.method ?? 'GET',
      ...(options.headers ? { headers: options.headers } : {}),
      ...(options.body !== undefined ? { body: options.body } : {}),
      signal: options.signal ? AbortSignal.any([options.signal, timeout]) : timeout,
    });
    const text = await response.text();
    let body: unknown;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      body = text;
    }
    return { status: response.status, headers: response.headers, body };
  } catch {
    return 'error';
  }
}

/** How long a refused client waits: the answer's `retry-after` (capped), else a doubling back-off. */
function backOffMs(answer: Answer | 'error', attempt: number, random: () => number): number {
  const retryAfter = answer === 'error' ? Number.NaN : Number(answer.headers.get('retry-after'));
  const base = Number.isFinite(retryAfter) && retryAfter >= 0 ? retryAfter * 1000 : 250 * 2 ** Math.min(attempt, 5);
  return Math.min(5_000, base) * (0.75 + random() * 0.5);
}

const ok = (answer: Answer | 'error'): boolean => answer !== 'error' && answer.status >= 200 && answer.status < 300;

/**
 * Composio's side: `ratePerSecond` new events spread over the installations, each posted to a
 * broker until one answers 2xx (a refusal is retried after a back-off, as Composio retries). Each
 * installation's events go out one after the other, so the order they were accepted in is the
 * order of their `seq`. Some are posted to both brokers at once; some accepted ones are delivered
 * again later with the same id, as Composio redelivers.
 */
export class WebhookSender {
  private readonly queues: PlannedEvent[][];
  private readonly nextSeq: number[];
  readonly sentIds: Array<Set<string>>;
  private readonly pendingRedeliveries = new Set<Promise<void>>();
  private generating = true;
  /** After this (ms since the run began), refused events are given up on. */
  private giveUpAt = Number.POSITIVE_INFINITY;
  private readonly workers: Promise<void>[];
  private readonly wake: Array<(() => void) | undefined>;

  constructor(
    private readonly options: {
      brokers: Brokers;
      installations: readonly SoakInstallation[];
      secret: string;
      ledger: Ledger;
      random: () => number;
      ratePerSecond: number;
      /** Share of events posted to both brokers at the same moment. */
      racingShare: number;
      /** Share of accepted events delivered again, `redeliveryDelayMs` later. */
      redeliveryShare: number;
      redeliveryDelayMs: readonly [number, number];
    },
  ) {
    const n = options.installations.length;
    this.queues = Array.from({ length: n }, () => []);
    this.nextSeq = Array.from({ length: n }, () => 1);
    this.sentIds = Array.from({ length: n }, () => new Set<string>());
    this.wake = Array.from({ length: n }, () => undefined);
    this.workers = options.installations.map((installation) => this.stream(installation));
  }

  /** Makes new events until `until` (ms since the run began). */
  async generate(until: number): Promise<void> {
    const { ledger, random, installations, ratePerSecond } = this.options;
    const intervalMs = 1000 / ratePerSecond;
    const from = ledger.now();
    for (let n = 0; ; n++) {
      const at = from + n * intervalMs;
      if (at >= until) break;
      const wait = at - ledger.now();
      if (wait > 0) await sleep(wait);
      const installation = installations[Math.floor(random() * installations.length)]!;
      this.plan(installation);
    }
    this.generating = false;
    for (const wake of this.wake) wake?.();
  }

  /** Waits until every event was accepted (or given up on at `giveUpAt`) and every redelivery answered. */
  async finish(giveUpAt: number): Promise<void> {
    this.giveUpAt = giveUpAt;
    await Promise.all(this.workers);
    while (this.pendingRedeliveries.size > 0) await Promise.all([...this.pendingRedeliveries]);
  }

  private plan(installation: SoakInstallation): void {
    const seq = this.nextSeq[installation.index]!++;
    const id = `msg_${randomUUID()}`;
    const target = {
      triggerSlug: 'GITHUB_COMMIT_EVENT',
      triggerId: installation.composioTriggerId,
      connectedAccountId: installation.connectedAccountId,
      authConfigId: 'ac_soak',
      userId: installation.composioUserId,
    };
    const body = triggerMessageBody(id, target, {
      seq,
      installation: installation.index,
      author: 'ada',
      message: `Commit ${seq} of the soak`,
      padding: 'x'.repeat(400),
    });
    this.sentIds[installation.index]!.add(id);
    this.queues[installation.index]!.push({ id, installation, seq, body });
    this.wake[installation.index]?.();
  }

  private async stream(installation: SoakInstallation): Promise<void> {
    const queue = this.queues[installation.index]!;
    for (;;) {
      const event = queue.shift();
      if (event) {
        await this.deliverUntilAccepted(event);
        continue;
      }
      if (!this.generating) return;
      await new Promise<void>((resolve) => {
        this.wake[installation.index] = resolve;
      });
      this.wake[installation.index] = undefined;
    }
  }

  private pickBroker(): string {
    const { urls } = this.options.brokers;
    return urls[Math.floor(this.options.random() * urls.length)]!;
  }

  /** One post of the event, signed afresh (each attempt has its own timestamp, as Composio's do). */
  private async post(url: string, event: PlannedEvent): Promise<Answer | 'error'> {
    this.options.ledger.webhookAttempts++;
    return call(`${url}/v1/webhooks/composio`, {
      method: 'POST',
      headers: signedHeaders(event.id, event.body, this.options.secret),
      body: event.body,
      timeoutMs: 15_000,
    });
  }

  /** Whether the answer says the event is in the queue; anything else is counted. */
  private heard(answer: Answer | 'error'): boolean {
    const { ledger } = this.options;
    if (!ok(answer)) {
      ledger.refused('webhooks', answer);
      return false;
    }
    const outcome = ((answer as Answer).body as { outcome?: unknown } | undefined)?.outcome;
    if (outcome === 'accepted' || outcome === 'duplicate') return true;
    const key = String(outcome);
    ledger.unexpectedOutcomes[key] = (ledger.unexpectedOutcomes[key] ?? 0) + 1;
    return false;
  }

  private async deliverUntilAccepted(event: PlannedEvent): Promise<void> {
    const { ledger, random, brokers } = this.options;
    for (let attempt = 0; ; attempt++) {
      let accepted: boolean;
      let last: Answer | 'error';
      if (attempt === 0 && brokers.urls.length > 1 && random() < this.options.racingShare) {
        // The same delivery reaching both brokers at once: one stores it, the other finds it stored.
        const answers = await Promise.all(brokers.urls.map((url) => this.post(url, event)));
        const heard = answers.map((answer) => this.heard(answer));
        accepted = heard.some(Boolean);
        last = answers.find((answer) => !ok(answer)) ?? answers[0]!;
      } else {
        last = await this.post(this.pickBroker(), event);
        accepted = this.heard(last);
      }
      if (accepted) {
        ledger.accept(event);
        if (random() < this.options.redeliveryShare) this.redeliverLater(event);
        return;
      }
      if (ledger.now() > this.giveUpAt) {
        ledger.abandoned++;
        return;
      }
      await sleep(backOffMs(last, attempt, random));
    }
  }

  private redeliverLater(event: PlannedEvent): void {
    const { ledger, random, redeliveryDelayMs } = this.options;
    const [min, max] = redeliveryDelayMs;
    const redelivery = (async () => {
      await sleep(min + random() * (max - min));
      ledger.redeliveries++;
      const answer = await this.post(this.pickBroker(), event);
      if (!ok(answer)) ledger.refused('webhooks', answer);
      else if (((answer as Answer).body as { outcome?: unknown } | undefined)?.outcome === 'accepted') ledger.redeliveriesStoredAgain++;
    })();
    this.pendingRedeliveries.add(redelivery);
    void redelivery.finally(() => this.pendingRedeliveries.delete(redelivery));
  }
}

/**
 * One app per installation, long-polling its queue with the cursor of the last batch it got
 * (which acknowledges it), on either broker. Some polls are hung up on mid-wait; the app comes
 * back with the cursor it had. Now and then it acknowledges with `POST /v1/events/ack` too.
 */
export class Consumers {
  private stopping = false;
  /** Each poll in flight, to be hung up on: the app's own hang-ups, and all of them at the end. */
  private readonly inFlight = new Set<AbortController>();
  private readonly loops: Promise<void>[];

  constructor(
    private readonly options: {
      brokers: Brokers;
      installations: readonly SoakInstallation[];
      ledger: Ledger;
      random: () => number;
      sentIds: ReadonlyArray<Set<string>>;
      /** Share of polls hung up on before their answer. */
      hangUpShare: number;
    },
  ) {
    this.loops = options.installations.map((installation) => this.consume(installation));
  }

  async stop(): Promise<void> {
    this.stopping = true;
    for (const poll of this.inFlight) poll.abort();
    await Promise.all(this.loops);
  }

  private async consume(installation: SoakInstallation): Promise<void> {
    const { ledger, random, brokers } = this.options;
    let cursor: string | undefined;
    let failures = 0;
    while (!this.stopping) {
      const url = brokers.urls[Math.floor(random() * brokers.urls.length)]!;
      const query = new URLSearchParams({ limit: '100', wait: '25', ...(cursor ? { cursor } : {}) });
      const hangUp = new AbortController();
      const hangUpTimer = random() < this.options.hangUpShare ? setTimeout(() => hangUp.abort(), 50 + random() * 4_000) : undefined;
      ledger.polls++;
      this.inFlight.add(hangUp);
      const answer = await call(`${url}/v1/events?${query}`, { headers: installation.auth, timeoutMs: 40_000, signal: hangUp.signal });
      this.inFlight.delete(hangUp);
      clearTimeout(hangUpTimer);
      if (this.stopping) return;
      if (hangUp.signal.aborted) {
        ledger.pollsHungUp++;
        await sleep(100 + random() * 900);
        continue;
      }
      if (!ok(answer)) {
        ledger.refused('events', answer);
        await sleep(backOffMs(answer, failures++, random));
        continue;
      }
      failures = 0;
      const batch = (answer as Answer).body as {
        events: Array<{ id: string; data?: { seq?: unknown; installation?: unknown } }>;
        cursor: string;
        gap?: boolean;
      };
      if (batch.gap) ledger.gaps++;
      for (const event of batch.events) ledger.deliver(installation.index, event, this.options.sentIds[installation.index]!);
      cursor = batch.cursor;
      if (batch.events.length > 0 && random() < 0.2) {
        const acked = await call(`${url}/v1/events/ack`, {
          method: 'POST',
          headers: { ...installation.auth, 'content-type': 'application/json' },
          body: JSON.stringify({ cursor }),
          timeoutMs: 15_000,
        });
        if (ok(acked)) ledger.acknowledgements++;
        else ledger.refused('ack', acked);
      }
    }
  }
}

/**
 * What an app does besides polling: check-ins (`GET /v1/me`), its connected apps
 * (`/v1/connectors/connected`, `/v1/connectors?services=`), and a balancer's `GET /health`,
 * about `perSecond` requests a second in all.
 */
export async function sideTraffic(options: {
  brokers: Brokers;
  installations: readonly SoakInstallation[];
  ledger: Ledger;
  random: () => number;
  perSecond: number;
  until: () => boolean;
}): Promise<void> {
  const { brokers, installations, ledger, random } = options;
  const kinds = [
    { kind: 'me', path: () => '/v1/me' },
    { kind: 'connectors', path: () => '/v1/connectors/connected' },
    { kind: 'connectors', path: () => '/v1/connectors?services=github,gmail' },
    { kind: 'health', path: () => '/health' },
  ] as const;
  const inFlight = new Set<Promise<void>>();
  while (!options.until()) {
    const { kind, path } = kinds[Math.floor(random() * kinds.length)]!;
    const installation = installations[Math.floor(random() * installations.length)]!;
    const url = brokers.urls[Math.floor(random() * brokers.urls.length)]!;
    const request = (async () => {
      ledger.sideRequests++;
      // Longer than the broker's own deadline for a request's Composio calls (COMPOSIO_TIMEOUT_MS,
      // 15 s), so a listing Composio keeps waiting is counted by the broker's answer, not as no answer.
      const answer = await call(`${url}${path()}`, { ...(kind === 'health' ? {} : { headers: installation.auth }), timeoutMs: 25_000 });
      if (!ok(answer)) ledger.refused(kind, answer);
    })();
    inFlight.add(request);
    void request.finally(() => inFlight.delete(request));
    await sleep((1000 / options.perSecond) * (0.5 + random()));
  }
  await Promise.all([...inFlight]);
}
