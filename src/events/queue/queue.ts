import type { Sql } from '../../db/database.js';
import { badRequest } from '../../errors.js';
import { eventOfRow, type QueuedEvent, type QueueRow } from '../event.js';
import type { Sealing } from '../sealing.js';

/** A run of an installation's queue after some position. */
export interface QueueSlice {
  readonly events: QueuedEvent[];
  /** The position the run ends at: its last event's, or where it started when it is empty. */
  readonly through: number;
  /** Where the run started (without a position asked for: the acknowledged one). */
  readonly start: number;
  /** The queue's last position when it was read. */
  readonly last: number;
  /** Events after the starting position were already removed by retention. */
  readonly gap: boolean;
}

/**
 * Up to `limit` events after `after` (or after the last acknowledged one when `after` is null),
 * in the order they were accepted. Null when the installation no longer exists.
 *
 * Reading `position > after` never skips an event: positions are allocated under the
 * installation's row lock and so become visible in order (migrations/functions/omb_append_events.sql).
 * Events received before the retention horizon (`event_retention.kept_since`) are not served,
 * even while their day's partition is still there.
 *
 * Positions are contiguous, so a gap needs no bookkeeping: when the first position served is not
 * the one right after `after` (or nothing is served while the queue goes further), the positions
 * in between were removed by retention.
 *
 * The read looks first in the day partitions of yesterday and today only, which is where a
 * client that keeps up finds what it has not read: the cost of a poll then stays the same however
 * many days the table holds. That answer is used only when it is provably the whole answer —
 * it starts right after `after`, its positions follow one another, and it either fills `limit` or
 * reaches the queue's last position — since positions are unique and contiguous, the full read
 * could not have answered anything else. Otherwise (a backlog older than yesterday, or a gap)
 * every kept day is read. Each read is migrations/functions/omb_read_queue.sql, planned once per
 * connection.
 */
export async function readQueue(
  sql: Sql,
  installationId: string,
  options: { after: number | null; limit: number },
  sealing?: Pick<Sealing, 'open'>,
): Promise<QueueSlice | null> {
  const recent = await readSlice(sql, installationId, options, true, sealing);
  if (!recent) return null;
  if (recent.whole) return recent.slice;
  return (await readSlice(sql, installationId, options, false, sealing))?.slice ?? null;
}

async function readSlice(
  sql: Sql,
  installationId: string,
  options: { after: number | null; limit: number },
  recentDaysOnly: boolean,
  sealing: Pick<Sealing, 'open'> | undefined,
): Promise<{ slice: QueueSlice; whole: boolean } | null> {
  // `data` as text: the answer carries it as Postgres wrote it (see QueuedEvent.dataJson).
  // A sealed event's data is null in the read: its sealed bytes are looked up by the row's key (an
  // index probe into one day's partition), and the Composio user they are bound to once for the
  // read (a subquery of no row's, run at most once, and only when a row is sealed).
  const rows = await sql<(QueueRow & { sealed: Buffer | null; composio_user_id: string | null })[]>`
    select q.after, q.last, q."position", q.id, q.type, q.trigger_id, q.automation_id, q.toolkit, q.trigger_slug,
           q.connected_account_id, q.received_at, q.data::text as data, s.sealed,
           case when s.sealed is not null
                then (select i.composio_user_id from installations i where i.id = ${installationId}::uuid) end as composio_user_id
      from omb_read_queue(${installationId}::uuid, ${options.after}::bigint, ${options.limit}::int, ${recentDaysOnly}::boolean) q
      left join lateral (
        select e.sealed from events e
         where q.data is null and e.installation_id = ${installationId}::uuid and e."position" = q."position"
           and e.received_at = q.received_at
      ) s on true
     order by q."position"`;
  const first = rows[0];
  if (!first) return null;
  const after = Number(first.after);
  const last = Number(first.last);
  const events: QueuedEvent[] = [];
  let through = after;
  let gap = false;
  for (const row of rows) {
    if (row.position === null) continue;
    const position = Number(row.position);
    if (position !== through + 1) gap = true;
    through = position;
    if (row.data === null) {
      // Sealed: opened, or, when it does not open, left out (and reported) as if acknowledged.
      const data =
        row.sealed && row.composio_user_id && sealing
          ? sealing.open(row.sealed, { installationId, composioUserId: row.composio_user_id, eventId: row.id!, position })
          : undefined;
      if (data === undefined) {
        if (!sealing) throw new Error(`event ${row.id} of installation ${installationId} is sealed, and this process has no data keys`);
        continue;
      }
      row.data = data;
    }
    events.push(eventOfRow(row));
  }
  // Nothing served although the queue goes further: everything after `after` is gone.
  // Nothing read though the queue goes on: retention removed it. (Events read and left out because
  // they did not decrypt moved `through` on: no gap, they are passed over as if acknowledged.)
  if (events.length === 0 && through === after && last > after) gap = true;
  const whole = !gap && (events.length === options.limit || through >= last);
  return { slice: { events, through, start: after, last, gap }, whole: !recentDaysOnly || whole };
}

/**
 * Marks every event up to `position` as acknowledged; an older position changes nothing (it may
 * be a replay) and writes nothing. Answers the queue's last position; null when the installation
 * no longer exists; `400` for a position past its queue.
 */
export async function acknowledge(sql: Sql, installationId: string, position: number): Promise<number | null> {
  const rows = await sql<{ last_event_position: string }[]>`
    with inst as (select last_event_position from installations where id = ${installationId}),
    moved as (
      update installations i set acked_event_position = ${position}
        from inst
       where i.id = ${installationId}
         and ${position} <= inst.last_event_position
         and i.acked_event_position < ${position}
      returning 1
    )
    select last_event_position from inst`;
  const row = rows[0];
  if (!row) return null;
  const last = Number(row.last_event_position);
  if (position > last) throw badRequest('cursor is beyond the end of this installation’s queue', 'invalid_cursor');
  return last;
}

/** Where an installation's queue stands, and whether it may still be served. */
export interface QueueHead {
  readonly installationId: string;
  readonly last: number;
  readonly acked: number;
  readonly disabled: boolean;
}

/**
 * Where each of these installations' queues stands, in one statement: how a process brings every
 * poll it holds up to date after it may have missed notifications. Installations that no longer
 * exist are left out.
 */
export async function queueHeads(sql: Sql, installationIds: readonly string[]): Promise<QueueHead[]> {
  if (installationIds.length === 0) return [];
  const rows = await sql<{ id: string; last: string; acked: string; disabled: boolean }[]>`
    select id, last_event_position as last, acked_event_position as acked, disabled_at is not null as disabled
      from installations
     where id = any(${sql.array(installationIds as string[])}::uuid[])`;
  return rows.map((row) => ({ installationId: row.id, last: Number(row.last), acked: Number(row.acked), disabled: row.disabled }));
}

/** Unacknowledged events still kept: what operators watch to see queues drain. */
export interface QueueBacklog {
  readonly depth: number;
  readonly oldestUnacknowledgedAt: Date | null;
}

/**
 * Queue depth and the oldest unacknowledged event, of every installation together or of one
 * (`installationId`): the one reading behind `/v1/admin/stats`, `/metrics` and the operators'
 * installation lookup, so they cannot drift apart. Events received before the retention horizon
 * are not counted, as polls no longer serve them (see readQueue). Only installations with a
 * backlog are visited, each through its (installation, position) index.
 */
export async function queueBacklog(sql: Sql, installationId?: string): Promise<QueueBacklog> {
  const [row] = await sql<{ depth: string | null; oldest: string | Date | null }[]>`
    select sum(backlog.depth)::bigint as depth, min(backlog.oldest) as oldest
    from installations i
    cross join lateral (
      select count(*) as depth, min(e.received_at) as oldest
      from events e
      where e.installation_id = i.id and e.position > i.acked_event_position
        and e.received_at >= coalesce((select r.kept_since from event_retention r), '-infinity')
    ) backlog
    where i.last_event_position > i.acked_event_position
      ${installationId === undefined ? sql`` : sql`and i.id = ${installationId}`}`;
  return { depth: Number(row?.depth ?? 0), oldestUnacknowledgedAt: row?.oldest ? new Date(row.oldest) : null };
}

/**
 * Seconds since the oldest unacknowledged event was received, never below 0 (the broker's clock
 * and Postgres's may disagree a little); null with nothing waiting.
 */
export function oldestUnacknowledgedAge(backlog: QueueBacklog, now: Date): number | null {
  const oldest = backlog.oldestUnacknowledgedAt;
  return oldest ? Math.max(0, (now.getTime() - oldest.getTime()) / 1000) : null;
}

/** A backlog as operators read it (`/v1/admin/stats`, the installation lookup): the age in whole seconds. */
export interface QueueFigures {
  depth: number;
  oldestUnacknowledgedAt: string | null;
  oldestUnacknowledgedAgeSeconds: number | null;
}

export function queueFigures(backlog: QueueBacklog, now: Date): QueueFigures {
  const age = oldestUnacknowledgedAge(backlog, now);
  return {
    depth: backlog.depth,
    oldestUnacknowledgedAt: backlog.oldestUnacknowledgedAt?.toISOString() ?? null,
    oldestUnacknowledgedAgeSeconds: age === null ? null : Math.floor(age),
  };
}
