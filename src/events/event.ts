import { z } from 'zod';
import { timestamp } from '../http/responses.js';

/**
 * An event as an installation receives it, written once: the types, the fields every event
 * carries beside its data (with the column of `omb_read_queue` each is read from), and the schema
 * the poll route declares. `QueuedEvent`, the rows read (queue.ts) and the answer's JSON
 * (routes.ts `eventJson`) are derived from these.
 */

/** What an installation's queue holds. Each shape is built by the database function that queues it. */
const QUEUED_EVENT_TYPES = ['trigger.event', 'trigger.test', 'connection.expired', 'trigger.disabled', 'quota.exceeded'] as const;
export type QueuedEventType = (typeof QUEUED_EVENT_TYPES)[number];

/** The fields beside `data`, in the order the answer writes them, each with the column it is read from. */
const EVENT_FIELDS = {
  id: 'id',
  type: 'type',
  triggerId: 'trigger_id',
  automationId: 'automation_id',
  toolkit: 'toolkit',
  triggerSlug: 'trigger_slug',
  connectedAccountId: 'connected_account_id',
  receivedAt: 'received_at',
} as const;
type EventField = keyof typeof EVENT_FIELDS;

/** The event as the poll route declares it (`Event` in openapi.yaml, named there by the route). */
export const EventSchema = z.object({
  id: z
    .string()
    .describe(
      'The `webhook-id` of the delivery (stable across redeliveries), or a broker-made id (`omb:…`) for `quota.exceeded`, `trigger.test` and a `trigger.disabled` the reconciliation found.',
    ),
  type: z.enum(QUEUED_EVENT_TYPES),
  triggerId: z.string().nullable().meta({ format: 'uuid' }),
  automationId: z.string().nullable(),
  toolkit: z.string().nullable(),
  triggerSlug: z.string().nullable(),
  connectedAccountId: z.string().nullable(),
  receivedAt: timestamp(),
  data: z
    .unknown()
    .describe(
      "`trigger.event`: the trigger's payload as Composio sent it. `trigger.test`: a sample payload of the trigger's type (`{}` when this broker does not hold the type), queued by `POST /v1/triggers/{id}/test`. `connection.expired`: `{connectedAccountId, toolkit, triggers: [{triggerId, automationId, triggerSlug}]}`. `trigger.disabled` (outside the quota): Composio stopped the trigger named by the event's `triggerId` by itself, `{reason, status}` — `reason` as Composio gave it (`connection_expired`, `subscription_auth_failure`, `subscription_refresh_failure`, `polling_failure_in_composio_infra`, or another Composio may add), `status` what the trigger now shows (`needs_reconnect` for `connection_expired`, else `disabled_by_composio`). `quota.exceeded`: `{day, eventsPerDay, resetsAt}`.",
    ),
  test: z.literal(true).optional().describe('Present on `trigger.test` events only: a test, not something that happened in the app.'),
});

/** One event as an installation receives it, `data` kept as the JSON text Postgres printed. */
export type QueuedEvent = Readonly<Pick<z.infer<typeof EventSchema>, EventField | 'test'>> & {
  /**
   * The event's data as JSON text, as Postgres prints it: handed to the app as it is, never parsed
   * here, where a number beyond a double (`1e400`, a 30-digit id) would be rounded or become null.
   */
  readonly dataJson: string;
};

/** A row of `omb_read_queue`: the event's columns (null on the row of an empty read), and where the queue stands. */
export type QueueRow = { [F in EventField as (typeof EVENT_FIELDS)[F]]: string | null } & {
  after: string;
  last: string;
  position: string | null;
  data: string | null;
};

/** The event a row holds (a row with a position). */
export function eventOfRow(row: QueueRow): QueuedEvent {
  const fields: Record<string, string | null> = {};
  for (const field of Object.keys(EVENT_FIELDS) as EventField[]) fields[field] = row[EVENT_FIELDS[field]];
  return {
    ...(fields as Omit<QueuedEvent, 'dataJson' | 'test'>),
    receivedAt: new Date(row.received_at!).toISOString(),
    dataJson: row.data!,
    ...(row.type === 'trigger.test' ? { test: true as const } : {}),
  };
}

/**
 * An event as JSON text, in the shape `EventSchema` declares: every field of `EVENT_FIELDS` by
 * JSON.stringify, then `data` spliced in as Postgres printed it (JSON.parse and JSON.stringify
 * would turn `1e400` into `null` and round a 30-digit number). Nothing undeclared leaves.
 */
export function eventJson(event: QueuedEvent): string {
  let text = '{';
  for (const field of Object.keys(EVENT_FIELDS) as EventField[]) text += `${JSON.stringify(field)}:${JSON.stringify(event[field])},`;
  if (event.test) text += '"test":true,';
  return `${text}"data":${event.dataJson}}`;
}
