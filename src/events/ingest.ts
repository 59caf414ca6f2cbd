import { utcDay } from '../clock.js';
import type { WebhookEvent } from '../composio/webhook-events.js';
import type { Database } from '../db/database.js';
import type { Quotas } from '../plans/plan.js';
import { matchesFilter } from '../triggers/filter.js';
import type { IngestBatcher, TriggerMessageInput } from './ingest-batcher.js';
import type { WebhookOutcome } from './outcomes.js';
import { dailyLimit, planThreshold } from './quota.js';

export interface IngestDeps {
  readonly database: Database;
  readonly quotas: Quotas;
  readonly batcher: IngestBatcher;
}

export interface IngestResult {
  readonly outcome: WebhookOutcome;
  /** The installation the event was routed to, when it was. */
  readonly installationId: string | null;
  /** Whether the installation's queue grew (its waiting polls should look again). */
  readonly appended: boolean;
}

/**
 * Routes one verified Composio webhook to its installation's queue. `eventId` is the
 * `webhook-id`: a redelivery is stored once. Never calls Composio.
 */
export async function ingestWebhookEvent(
  deps: IngestDeps,
  input: { eventId: string; event: WebhookEvent; receivedAt: Date },
): Promise<IngestResult> {
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
      return { outcome: 'ignored', installationId: null, appended: false };
  }
}

/**
 * A trigger's event: dedupe, filter, quota, append and counters happen in the database in one
 * go (migrations/0002_*.sql), usually together with other webhooks' (see IngestBatcher). The
 * database asks back only for what lives here: the filter (for a trigger that has one) and the
 * plan (for an installation near a limit).
 */
export async function ingestTriggerMessage(
  deps: IngestDeps,
  message: { eventId: string; composioTriggerId: string; userId: string; data: Record<string, unknown>; receivedAt: Date },
): Promise<IngestResult> {
  let input: TriggerMessageInput = {
    eventId: message.eventId,
    // jsonb refuses NUL; such ids match nothing and end as unknown triggers.
    triggerId: message.composioTriggerId.replaceAll('\u0000', '\uFFFD'),
    userId: message.userId.replaceAll('\u0000', '\uFFFD'),
    dataJson: jsonForPostgres(message.data),
    receivedAt: message.receivedAt.toISOString(),
    day: utcDay(message.receivedAt),
    filterChecked: false,
    planThreshold: planThreshold(deps.quotas),
    dailyLimit: null,
  };
  // At most three writes: once more after the filter, once more after the plan.
  for (let call = 0; call < 3; call++) {
    const row = await deps.batcher.write(input);
    if (row.outcome === 'check_filter') {
      if (!matchesFilter(row.trigger_toolkit ?? '', row.trigger_filter ?? {}, message.data)) {
        return { outcome: 'filtered', installationId: row.installation, appended: false };
      }
      input = { ...input, filterChecked: true };
    } else if (row.outcome === 'check_plan') {
      input = { ...input, dailyLimit: await dailyLimit(deps.database.db, row.installation!, message.receivedAt, deps.quotas) };
    } else {
      return { outcome: row.outcome, installationId: row.installation, appended: row.appended };
    }
  }
  throw new Error('trigger message ingest did not settle');
}

/** An expired connected account: its triggers need a reconnect, and the installation is told once. */
export async function ingestAccountExpired(
  deps: IngestDeps,
  input: { eventId: string; connectedAccountId: string; userId: string; toolkit: string | null; receivedAt: Date },
): Promise<IngestResult> {
  const [row] = await deps.database.sql<{ outcome: WebhookOutcome; installation: string | null; appended: boolean }[]>`
    select * from omb_ingest_account_expired(
      ${input.eventId}::text, ${input.connectedAccountId}::text, ${input.userId}::text, ${input.toolkit}::text,
      ${input.receivedAt.toISOString()}::timestamptz)`;
  if (!row) throw new Error('omb_ingest_account_expired returned no row');
  return { outcome: row.outcome, installationId: row.installation, appended: row.appended };
}

/**
 * JSON text Postgres accepts as `jsonb`, which refuses the NUL character. A payload carrying one
 * would otherwise fail on every redelivery; NUL becomes U+FFFD instead.
 */
export function jsonForPostgres(value: unknown): string {
  const text = JSON.stringify(value);
  return text.includes('\\u0000') ? JSON.stringify(withoutNul(value)) : text;
}

function withoutNul(value: unknown): unknown {
  if (typeof value === 'string') return value.replaceAll('\u0000', '\uFFFD');
  if (Array.isArray(value)) return value.map(withoutNul);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [withoutNul(k) as string, withoutNul(v)]));
  }
  return value;
}
