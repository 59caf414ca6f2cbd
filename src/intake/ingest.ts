import type { WebhookEvent } from '../composio/webhook-events.js';
import type { Database } from '../db/database.js';
import { storableText } from '../http/json-limits.js';
import type { Quotas } from '../plans/plan.js';
import { quotaDay, quotaExceededEventId } from '../queue/broker-events.js';
import type { QueuedEventType } from '../queue/queue.js';
import type { IngestBatcher } from './ingest-batcher.js';
import type { WebhookOutcome } from './outcomes.js';

export interface IngestDeps {
  readonly database: Database;
  readonly quotas: Quotas;
  readonly batcher: IngestBatcher;
  /** Wakes the installation's waiting polls, in every broker process, once an append has committed. */
  readonly notifier: { committed(installationId: string): void };
  /** Told the type of every event queued (for metrics). */
  readonly onQueued?: (type: QueuedEventType) => void;
}

export interface IngestResult {
  readonly outcome: WebhookOutcome;
  /** The installation the event was routed to, when it was. */
  readonly installationId: string | null;
  /** The type of the event the webhook put in the installation's queue, null when it queued none. */
  readonly queued: QueuedEventType | null;
}

/**
 * Routes one verified Composio webhook to its installation's queue. `eventId` is the
 * `webhook-id`: a redelivery is stored once. Never calls Composio. Once an event has been
 * queued and committed, its installation's waiting polls are woken here: no caller can forget.
 */
export async function ingestWebhookEvent(
  deps: IngestDeps,
  input: { eventId: string; event: WebhookEvent; receivedAt: Date },
): Promise<IngestResult> {
  const result = await route(deps, input);
  if (result.queued && result.installationId) {
    deps.notifier.committed(result.installationId);
    deps.onQueued?.(result.queued);
  }
  return result;
}

function route(deps: IngestDeps, input: { eventId: string; event: WebhookEvent; receivedAt: Date }): Promise<IngestResult> {
  const { event } = input;
  switch (event.type) {
    case 'composio.trigger.message':
      return ingestTriggerMessage(deps, {
        eventId: input.eventId,
        composioTriggerId: event.triggerId,
        userId: event.userId,
        data: event.data,
        receivedAt: input.receivedAt,
      });
    case 'composio.connected_account.expired':
      return ingestAccountExpired(deps, {
        eventId: input.eventId,
        connectedAccountId: event.connectedAccountId,
        userId: event.userId,
        toolkit: event.toolkit,
        receivedAt: input.receivedAt,
      });
    case 'other':
      return Promise.resolve({ outcome: 'ignored', installationId: null, queued: null });
  }
}

/**
 * A trigger's event: filter, dedupe, plan, quota, append and counters happen in the database in
 * one go, usually together with other webhooks' (see IngestBatcher and
 * migrations/functions/omb_ingest_trigger_batch.sql). What is decided here is only what lives
 * here: the UTC day the message counts in, and the ids of the events the broker makes.
 */
async function ingestTriggerMessage(
  deps: IngestDeps,
  message: { eventId: string; composioTriggerId: string; userId: string; data: Record<string, unknown>; receivedAt: Date },
): Promise<IngestResult> {
  const { day, resetsAt } = quotaDay(message.receivedAt);
  const row = await deps.batcher.write({
    eventId: message.eventId,
    // jsonb refuses NUL; such ids match nothing and end as unknown triggers.
    triggerId: message.composioTriggerId.replaceAll('\u0000', '\uFFFD'),
    userId: message.userId.replaceAll('\u0000', '\uFFFD'),
    dataJson: jsonForPostgres(message.data),
    receivedAt: message.receivedAt.toISOString(),
    day,
    resetsAt: resetsAt.toISOString(),
    quotaEventId: quotaExceededEventId(day),
    quotaStandard: deps.quotas.standard,
    quotaPaid: deps.quotas.paid,
  });
  return { outcome: row.outcome, installationId: row.installation, queued: row.queued };
}

/** An expired connected account: its triggers need a reconnect, and the installation is told once. */
async function ingestAccountExpired(
  deps: IngestDeps,
  input: { eventId: string; connectedAccountId: string; userId: string; toolkit: string | null; receivedAt: Date },
): Promise<IngestResult> {
  const [row] = await deps.database.sql<{ outcome: WebhookOutcome; installation: string | null; queued: QueuedEventType | null }[]>`
    select * from omb_ingest_account_expired(
      ${input.eventId}::text, ${input.connectedAccountId}::text, ${input.userId}::text, ${input.toolkit}::text,
      ${input.receivedAt.toISOString()}::timestamptz)`;
  if (!row) throw new Error('omb_ingest_account_expired returned no row');
  return { outcome: row.outcome, installationId: row.installation, queued: row.queued };
}

/**
 * JSON text Postgres accepts as `jsonb`, which refuses the NUL character and unpaired UTF-16
 * surrogates (an e-mail subject cut mid-emoji). A payload carrying one would otherwise fail on
 * every redelivery; each becomes U+FFFD instead. JSON.stringify writes both as `\u` escapes (a
 * paired surrogate is written as itself), so the text says whether there is anything to replace.
 */
export function jsonForPostgres(value: unknown): string {
  const text = JSON.stringify(value);
  return /\\u(0000|d[89a-f])/i.test(text) ? JSON.stringify(storable(value)) : text;
}

function storable(value: unknown): unknown {
  if (typeof value === 'string') return storableText(value);
  if (Array.isArray(value)) return value.map(storable);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [storableText(k), storable(v)]));
  }
  return value;
}
