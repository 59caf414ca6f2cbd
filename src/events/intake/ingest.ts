import type { WebhookEvent } from '../../composio/webhook-events.js';
import type { Database, Sql } from '../../db/database.js';
import { mayExceedNumeric, storableJsonText, writtenOutLength } from '../../http/json-limits.js';
import type { Quotas } from '../../plans/plan.js';
import { quotaDay } from '../../plans/plan.js';
import { quotaExceededEventId } from '../broker-events.js';
import type { QueuedEventType } from '../event.js';
import { announcingQueued, type EventNotifier } from '../queue/notifier.js';
import type { Sealing } from '../sealing.js';
import type { IngestBatcher } from './ingest-batcher.js';
import { jsonMemberText } from './member-text.js';
import type { WebhookOutcome } from './outcomes.js';

export interface IngestDeps {
  readonly database: Database;
  readonly quotas: Quotas;
  readonly batcher: IngestBatcher;
  /** Told of every event queued, once committed: wakes the installation's polls here and counts it. */
  readonly notifier: Pick<EventNotifier, 'queued'>;
  /** Seals trigger events' data when it may (absent: stored in clear). */
  readonly sealing?: Pick<Sealing, 'sealFor'>;
}

export interface IngestResult {
  readonly outcome: WebhookOutcome;
  /** The installation the event was routed to, when it was. */
  readonly installationId: string | null;
  /** The type of the event the webhook put in the installation's queue, null when it queued none. */
  readonly queued: QueuedEventType | null;
}

/** One verified delivery: `event` is what the broker reads of it, `payloadJson` all of it, as JSON text. */
export interface WebhookInput {
  readonly eventId: string;
  readonly event: WebhookEvent;
  /** The delivery's text, valid JSON: a trigger message's `data` is stored from it, exactly as sent. */
  readonly payloadJson: string;
  readonly receivedAt: Date;
}

/**
 * Routes one verified Composio webhook to its installation's queue. `eventId` is the
 * `webhook-id`: a redelivery is stored once. Never calls Composio. Once an event has been
 * queued and committed, its installation's waiting polls are woken here: no caller can forget.
 */
export async function ingestWebhookEvent(deps: IngestDeps, input: WebhookInput): Promise<IngestResult> {
  const result = await route(deps, input);
  if (result.queued && result.installationId) deps.notifier.queued(result.installationId, result.queued);
  return result;
}

function route(deps: IngestDeps, input: WebhookInput): Promise<IngestResult> {
  const { event } = input;
  switch (event.type) {
    case 'composio.trigger.message':
      return ingestTriggerMessage(deps, {
        eventId: input.eventId,
        composioTriggerId: event.triggerId,
        userId: event.userId,
        payloadJson: input.payloadJson,
        receivedAt: input.receivedAt,
      });
    case 'composio.connected_account.expired':
      return ingestAccountExpired(deps, {
        eventId: input.eventId,
        connectedAccountId: event.connectedAccountId,
        toolkit: event.toolkit,
        receivedAt: input.receivedAt,
      });
    case 'composio.trigger.disabled':
      return ingestTriggerDisabled(deps.database.sql, {
        eventId: input.eventId,
        composioTriggerId: event.triggerId,
        reason: event.reason,
        receivedAt: input.receivedAt,
      });
    case 'other':
      return Promise.resolve({ outcome: 'ignored', installationId: null, queued: null });
  }
}

/**
 * A trigger's event: filter, dedupe, plan, quota, append and counters happen in the database in
 * one go, usually together with other webhooks' (see IngestBatcher and
 * migrations/functions/omb_ingest_trigger_batch_sealed.sql). What is decided here is only what
 * lives here: the UTC day the message counts in, and the ids of the events the broker makes.
 */
async function ingestTriggerMessage(
  deps: IngestDeps,
  message: { eventId: string; composioTriggerId: string; userId: string; payloadJson: string; receivedAt: Date },
): Promise<IngestResult> {
  // As the app would read it back: a few bytes of exponents can print as megabytes of digits.
  if (writtenOutLength(message.payloadJson) > STORED_PAYLOAD_LIMIT) return { outcome: 'unstorable', installationId: null, queued: null };
  const { day, resetsAt } = quotaDay(message.receivedAt);
  // jsonb refuses NUL; such ids match nothing and end as unknown triggers.
  const userId = message.userId.replaceAll('\u0000', '\uFFFD');
  // Parsed already: a trigger message's `data` is an object (src/composio/webhook-events.ts).
  const data = jsonMemberText(message.payloadJson, 'data');
  if (data === undefined) throw new Error('a trigger message without data reached ingest');
  const sealed = deps.sealing?.sealFor(userId, message.eventId, data);
  try {
    const row = await deps.batcher.write({
      eventId: message.eventId,
      triggerId: message.composioTriggerId.replaceAll('\u0000', '\uFFFD'),
      userId,
      dataJson: storableJsonText(data),
      receivedAt: message.receivedAt.toISOString(),
      day,
      resetsAt: resetsAt.toISOString(),
      quotaEventId: quotaExceededEventId(day),
      quotaStandard: deps.quotas.standard,
      quotaPaid: deps.quotas.paid,
      // Sealed, the clear data goes to Postgres only where it must read it: for the trigger's
      // filter, and to refuse a number jsonb cannot hold, as it does for data stored in clear.
      ...(sealed === undefined ? {} : { sealed, dataForFilterOnly: !mayExceedNumeric(data) }),
    });
    return { outcome: row.outcome, installationId: row.installation, queued: row.queued };
  } catch (error) {
    // A number beyond what jsonb holds (numeric: 131072 digits before the point, 16383 after)
    // cannot be kept as sent, and rounding it would hand the app another event than Composio's.
    if ((error as { code?: unknown }).code === NUMERIC_OUT_OF_RANGE) return { outcome: 'unstorable', installationId: null, queued: null };
    throw error;
  }
}

/** What the single-event ingest functions answer. */
interface IngestRow {
  outcome: WebhookOutcome;
  installation: string | null;
  queued: QueuedEventType | null;
}

/** Postgres's `numeric_value_out_of_range`. */
const NUMERIC_OUT_OF_RANGE = '22003';
/** A payload with its numbers written out may be as large as a webhook body (src/events/intake/webhook-routes.ts), no larger. */
const STORED_PAYLOAD_LIMIT = 1024 * 1024;

/**
 * An expired connected account: its triggers need a reconnect, and the installation that owns it
 * is told once. The owner is the one the broker stored for the account id; the event's `user_id`
 * (deprecated, often absent) is not even passed on, so it cannot choose whom the event reaches.
 */
async function ingestAccountExpired(
  deps: IngestDeps,
  input: { eventId: string; connectedAccountId: string; toolkit: string | null; receivedAt: Date },
): Promise<IngestResult> {
  const [row] = await announcingQueued(deps.database.sql)<IngestRow[]>`omb_ingest_account_expiry(
      ${input.eventId}::text, ${input.connectedAccountId}::text, ${input.toolkit}::text,
      ${input.receivedAt.toISOString()}::timestamptz)`;
  if (!row) throw new Error('omb_ingest_account_expiry returned no row');
  return { outcome: row.outcome, installationId: row.installation, queued: row.queued };
}

/**
 * A trigger Composio stopped by itself: the trigger shows it, and the installation whose trigger
 * it is (by the Composio trigger id the broker stored) hears it once, outside the quota
 * (migrations/functions/omb_ingest_trigger_disabled.sql). Also how the reconciliation announces
 * one it found stopped, with an id of the broker's own.
 */
export async function ingestTriggerDisabled(
  sql: Sql,
  input: { eventId: string; composioTriggerId: string; reason: string; receivedAt: Date },
): Promise<IngestResult> {
  const [row] = await announcingQueued(sql)<IngestRow[]>`omb_ingest_trigger_disabled(
      ${input.eventId}::text, ${input.composioTriggerId.replaceAll('\u0000', '\uFFFD')}::text,
      ${input.reason.replaceAll('\u0000', '\uFFFD')}::text, ${input.receivedAt.toISOString()}::timestamptz)`;
  if (!row) throw new Error('omb_ingest_trigger_disabled returned no row');
  return { outcome: row.outcome, installationId: row.installation, queued: row.queued };
}

/**
 * A value the broker holds (a test event's sample payload) as JSON text Postgres accepts as
 * `jsonb`, which refuses the NUL character and unpaired UTF-16 surrogates: JSON.stringify writes
 * both as `\u` escapes, and each becomes U+FFFD. (A webhook's payload is stored from its own
 * text instead, see ingestTriggerMessage.)
 */
export function jsonForPostgres(value: unknown): string {
  return storableJsonText(JSON.stringify(value));
}
