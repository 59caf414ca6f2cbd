import { randomBytes, randomUUID } from 'node:crypto';
import { expect } from 'vitest';
import type { WebhookEvent } from '../../src/composio/webhook-events.js';
import { signWebhook } from '../../src/composio/webhook-signature.js';
import type { Env } from '../../src/config.js';
import type { Database, Sql } from '../../src/db/database.js';
import type { EventHub, WakeReason } from '../../src/events/queue/hub.js';
import { createEventsRuntime, type EventsRuntime } from '../../src/events/runtime.js';
import { composioUserIdFor } from '../../src/installations/tokens.js';
import { createLogger } from '../../src/logger.js';
import { buildTestApp, type TestApp } from '../support/app.js';
import { testDataKeys } from '../support/data-keys.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

/**
 * A wait in `hub` as a promise of why it ended: `closing` when the hub would not wait (it is
 * closing), `cancelled` when `cancel()` came first (the hub itself never says so).
 */
export function waitIn(hub: EventHub, installationId: string, timeoutMs: number) {
  let resolve!: (reason: WakeReason | 'cancelled') => void;
  const woken = new Promise<WakeReason | 'cancelled'>((settle) => {
    resolve = settle;
  });
  const wait = hub.wait(installationId, timeoutMs, { wake: resolve });
  if (!wait) resolve('closing');
  return {
    woken,
    cancel: () => {
      wait?.cancel();
      resolve('cancelled');
    },
  };
}

/** `sql` that counts the queue reads (`omb_read_queue`) sent through it; `reads()` says how many so far. */
export function countingQueueReads(sql: Sql): { sql: Sql; reads: () => number } {
  let reads = 0;
  const counted = new Proxy(sql, {
    apply(target, thisArg, args: unknown[]) {
      const strings = args[0];
      if (Array.isArray(strings) && strings.join('?').includes('omb_read_queue')) reads++;
      return Reflect.apply(target as unknown as (...a: unknown[]) => unknown, thisArg, args);
    },
  }) as Sql;
  return { sql: counted, reads: () => reads };
}

/**
 * `sql`, recording the text of every statement sent through it (whitespace folded), the LISTEN
 * connection's heartbeat aside (per process, not per request); `take` answers those recorded
 * since it was last called.
 */
export function countingStatements(sql: Sql): { sql: Sql; take: () => string[] } {
  let statements: string[] = [];
  const counted = new Proxy(sql, {
    apply(target, thisArg, args: unknown[]) {
      const strings = args[0];
      if (Array.isArray(strings)) {
        const text = strings.join('?').replace(/\s+/g, ' ').trim();
        if (!text.includes('omb_listener_heartbeat')) statements.push(text);
      }
      return Reflect.apply(target as unknown as (...a: unknown[]) => unknown, thisArg, args);
    },
  }) as Sql;
  return {
    sql: counted,
    take() {
      const taken = statements;
      statements = [];
      return taken;
    },
  };
}

/** The secret test brokers are configured with (`COMPOSIO_WEBHOOK_SECRET`). */
export const SECRET = 'whsec_test_events_secret_0123456789';

export interface TestTrigger {
  id: string;
  installationId: string;
  composioTriggerId: string;
  composioUserId: string;
  automationId: string;
  toolkit: string;
  triggerSlug: string;
  connectedAccountId: string;
}

/** A trigger row as trigger CRUD would store it (that feature is not under test here). */
export async function insertTrigger(
  database: Pick<Database, 'sql'>,
  installationId: string,
  options: { toolkit?: string; triggerSlug?: string; connectedAccountId?: string; filter?: Record<string, string>; enabled?: boolean } = {},
): Promise<TestTrigger> {
  const trigger: TestTrigger = {
    id: randomUUID(),
    installationId,
    composioTriggerId: `ti_${randomBytes(8).toString('hex')}`,
    composioUserId: composioUserIdFor(installationId),
    automationId: `a_${randomBytes(4).toString('hex')}`,
    toolkit: options.toolkit ?? 'github',
    triggerSlug: options.triggerSlug ?? 'GITHUB_ISSUE_ADDED_EVENT',
    connectedAccountId: options.connectedAccountId ?? `ca_${randomBytes(6).toString('hex')}`,
  };
  await database.sql`
    insert into triggers (id, installation_id, automation_id, toolkit, trigger_slug, connected_account_id,
                          composio_trigger_id, filter, enabled)
    values (${trigger.id}, ${installationId}, ${trigger.automationId}, ${trigger.toolkit}, ${trigger.triggerSlug},
            ${trigger.connectedAccountId}, ${trigger.composioTriggerId}, ${JSON.stringify(options.filter ?? {})}::text::jsonb,
            ${options.enabled ?? true})`;
  return trigger;
}

/**
 * An installation row and one trigger of it, written directly, for tests of what happens below
 * the routes (registration is not under test there).
 */
export async function installationWithTrigger(
  database: Pick<Database, 'sql'>,
  options: Parameters<typeof insertTrigger>[2] = {},
): Promise<TestTrigger> {
  const id = randomUUID();
  await database.sql`insert into installations (id, token_hash, composio_user_id)
                     values (${id}, ${randomBytes(32).toString('hex')}, ${composioUserIdFor(id)})`;
  return insertTrigger(database, id, options);
}

/** A trigger message as ingest takes it, already parsed from its webhook. */
export function parsedTriggerMessage(trigger: TestTrigger, data: Record<string, unknown> = { n: 1 }): WebhookEvent {
  return {
    type: 'composio.trigger.message',
    id: `msg_${randomUUID()}`,
    timestamp: new Date().toISOString(),
    triggerId: trigger.composioTriggerId,
    triggerSlug: trigger.triggerSlug,
    connectedAccountId: trigger.connectedAccountId,
    userId: trigger.composioUserId,
    data,
  };
}

/** The delivery text a parsed event stands for, as ingest reads it (`payloadJson`): its `data`. */
export function payloadJsonOf(event: WebhookEvent): string {
  return JSON.stringify({ data: event.type === 'composio.trigger.message' ? event.data : {} });
}

/** A V3 `composio.trigger.message` for the trigger. */
export function triggerMessage(trigger: TestTrigger, data: Record<string, unknown> = {}, overrides: { userId?: string } = {}) {
  return {
    id: `msg_${randomUUID()}`,
    timestamp: new Date().toISOString(),
    type: 'composio.trigger.message',
    metadata: {
      log_id: `log_${randomBytes(4).toString('hex')}`,
      trigger_slug: trigger.triggerSlug,
      trigger_id: trigger.composioTriggerId,
      connected_account_id: trigger.connectedAccountId,
      auth_config_id: 'ac_test',
      user_id: overrides.userId ?? trigger.composioUserId,
    },
    data,
  };
}

/** A V3 `composio.connected_account.expired` for an account of the installation's user. */
export function accountExpired(composioUserId: string, connectedAccountId: string, toolkit = 'github') {
  return {
    id: `msg_${randomUUID()}`,
    timestamp: new Date().toISOString(),
    type: 'composio.connected_account.expired',
    metadata: { project_id: 'pr_test', org_id: 'ok_test' },
    data: { id: connectedAccountId, user_id: composioUserId, status: 'EXPIRED', toolkit: { slug: toolkit } },
  };
}

export interface SignedWebhook {
  id: string;
  body: string;
  headers: Record<string, string>;
}

/** Headers and body as Composio would post them, signed at `at` (seconds default to now). */
export function signed(payload: unknown, options: { id?: string; at?: Date; secret?: string } = {}): SignedWebhook {
  const id = options.id ?? `msg_${randomUUID()}`;
  const timestamp = Math.floor((options.at ?? new Date()).getTime() / 1000);
  const body = typeof payload === 'string' ? payload : JSON.stringify(payload);
  return {
    id,
    body,
    headers: {
      'content-type': 'application/json',
      'webhook-id': id,
      'webhook-timestamp': String(timestamp),
      'webhook-signature': signWebhook({ id, timestamp, body, secret: options.secret ?? SECRET }),
    },
  };
}

export async function countEvents(database: Pick<Database, 'sql'>, installationId?: string): Promise<number> {
  const [row] = installationId
    ? await database.sql<{ n: number }[]>`select count(*)::int as n from events where installation_id = ${installationId}`
    : await database.sql<{ n: number }[]>`select count(*)::int as n from events`;
  return row!.n;
}

export const BROKER_ENV = {
  COMPOSIO_API_KEY: 'ak_test',
  COMPOSIO_BASE_URL: 'http://127.0.0.1:9',
  COMPOSIO_WEBHOOK_SECRET: SECRET,
};

export interface EventsTestApp extends TestApp {
  events: EventsRuntime;
}

/**
 * `buildTestApp`, but holding the app's events runtime so tests can look at the waiting room.
 * Signed with `SECRET`; pass `database` to put several apps (as several brokers) on one database.
 */
export async function buildEventsApp(env: Env = {}, options: { database?: TestDatabase } = {}): Promise<EventsTestApp> {
  const database = options.database ?? (await createTestDatabase());
  const events = createEventsRuntime({ database, logger: createLogger('silent'), dataKeys: testDataKeys() });
  const t = await buildTestApp({ ...BROKER_ENV, ...env }, { database, events });
  return {
    ...t,
    events,
    async close() {
      try {
        await t.app.close();
      } finally {
        if (!options.database) await database.drop();
      }
    },
  };
}

/*
 * Requests of the events tests, against an in-process app. Each takes the test app first (its
 * `clock` signs what `send` posts), so one file can talk to several apps on one database.
 */

type Auth = { authorization: string };

/** `POST /v1/webhooks/composio` as Composio would post `webhook`, from `ip` when given; the answer as it came. */
export function post(to: Pick<TestApp, 'app'>, webhook: SignedWebhook, options: { ip?: string } = {}) {
  return to.app.inject({
    method: 'POST',
    url: '/v1/webhooks/composio',
    headers: webhook.headers,
    payload: webhook.body,
    ...(options.ip ? { remoteAddress: options.ip } : {}),
  });
}

export interface Sent {
  /** The delivery's `webhook-id`, which becomes the event's id. */
  id: string;
  outcome: string;
}

/**
 * A trigger message signed at the app's now (with `data`, under the `webhook-id` `id` when
 * given) and posted; it must be answered 200 with `{outcome}` and nothing else.
 */
export async function send(
  to: Pick<TestApp, 'app' | 'clock'>,
  trigger: TestTrigger,
  options: { data?: Record<string, unknown>; id?: string } = {},
): Promise<Sent> {
  const webhook = signed(triggerMessage(trigger, options.data), { at: to.clock.now(), ...(options.id ? { id: options.id } : {}) });
  const response = await post(to, webhook);
  expect(response.statusCode).toBe(200);
  const body = response.json<{ outcome: string }>();
  expect(body).toEqual({ outcome: expect.any(String) });
  return { id: webhook.id, outcome: body.outcome };
}

/** `send` for a message that must be accepted; the id of the event it queued. */
export async function sendAccepted(to: Pick<TestApp, 'app' | 'clock'>, trigger: TestTrigger, data: Record<string, unknown> = {}) {
  const { id, outcome } = await send(to, trigger, { data });
  expect(outcome).toBe('accepted');
  return id;
}

/**
 * A query of `GET /v1/events`: an object is encoded, with `wait: 0` unless it sets `wait`; a
 * string goes exactly as written (for values a test spells on purpose, or no `wait` at all).
 */
export type EventsQuery = string | Record<string, string | number>;

/** `GET /v1/events`; the answer as it came. */
export function getEvents(from: Pick<TestApp, 'app'>, auth: Auth, query: EventsQuery = {}) {
  const search =
    typeof query === 'string'
      ? query
      : new URLSearchParams(Object.entries({ wait: 0, ...query }).map(([k, v]): [string, string] => [k, String(v)])).toString();
  return from.app.inject({ method: 'GET', url: `/v1/events?${search}`, headers: auth });
}

/** An event as a poll answers it, loosely typed: tests compare it with what they expect. */
export type PolledEvent = { id: string; type: string; data: any; [field: string]: any };
export interface Batch {
  events: PolledEvent[];
  cursor: string;
  gap?: boolean;
}

/** One poll (`getEvents`) that must be answered 200, uncached; the batch. */
export async function poll(from: Pick<TestApp, 'app'>, auth: Auth, query: EventsQuery = {}): Promise<Batch> {
  const response = await getEvents(from, auth, query);
  expect(response.statusCode).toBe(200);
  expect(response.headers['cache-control']).toBe('no-store');
  return response.json<Batch>();
}

/** Up to 100 of the installation's events from where it acknowledged, acknowledging none. */
export async function drain(from: Pick<TestApp, 'app'>, auth: Auth): Promise<PolledEvent[]> {
  return (await poll(from, auth, { limit: 100 })).events;
}
