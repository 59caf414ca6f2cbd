import type { Logger } from 'pino';
import type postgres from 'postgres';
import type { Clock } from '../../clock.js';
import type { Sql } from '../../db/database.js';
import { forgetUsageBefore } from '../../plans/usage.js';
import { type RepeatingJob, startRepeatingJob } from '../../repeating-job.js';

/** Any fixed number: the lock that lets one broker process at a time remove expired events. */
const RETENTION_LOCK = 7_262_011_002;
const DAY_MS = 86_400_000;
const FIRST_RUN_DELAY_MS = 10_000;
/** Day partitions are created this many days ahead of today, so a day never starts without one. */
const PARTITION_DAYS_AHEAD = 3;
/**
 * Detaching a day needs `events` to itself for a moment: it waits for the statements running on
 * it to finish, and statements arriving meanwhile wait behind it. So each attempt waits at most
 * this long, and a few attempts are made; a day still not detached is tried by the next run.
 */
const DROP_LOCK_TIMEOUT = '200ms';
const DROP_ATTEMPTS = 5;
const DROP_RETRY_MS = 100;
const LOCK_NOT_AVAILABLE = '55P03';

export interface RetentionRun {
  /** False when another process held the lock and this run did nothing. */
  readonly ran: boolean;
  /** Events removed one by one from the default partition (received on a day that had no partition). */
  readonly removed: number;
}

/** Runs `statement` in a transaction holding the retention lock; undefined when another process holds it. */
async function underLock<T>(sql: Sql, statement: (tx: postgres.TransactionSql) => Promise<T>): Promise<{ value: T } | undefined> {
  const result = await sql.begin(async (tx) => {
    const [row] = await tx<{ locked: boolean }[]>`select pg_try_advisory_xact_lock(${RETENTION_LOCK}) as locked`;
    if (!row?.locked) return undefined;
    return { value: await statement(tx) };
  });
  return result as { value: T } | undefined;
}

/**
 * Creates the day partitions of `events` from `today` through PARTITION_DAYS_AHEAD days later
 * that do not exist yet (migrations/functions/omb_event_partitions_ensure.sql), under the
 * retention lock. Answers how many it created; undefined when another process held the lock.
 */
export async function ensureEventPartitions(sql: Sql, today: Date): Promise<number | undefined> {
  const from = today.toISOString().slice(0, 10);
  const run = await underLock(sql, async (tx) => {
    // Attaching locks the default partition (and checks it) for a moment; never queue long for
    // it. Partitions are made days ahead, so a run that gives up is retried well in time.
    await tx.unsafe(`set local lock_timeout = '${DROP_LOCK_TIMEOUT}'`);
    const [row] = await tx<{ created: number }[]>`
      select omb_event_partitions_ensure(${from}::date, ${from}::date + ${PARTITION_DAYS_AHEAD}::int) as created`;
    return row?.created ?? 0;
  });
  return run?.value;
}

/**
 * Retires events received before `horizon`, acknowledged or not, without touching them one by
 * one: polls stop serving them at once (`event_retention.kept_since`, read by
 * src/events/queue/queue.ts), and dropExpiredDays later drops their day whole. Only events in the
 * default partition (received on a day that had no partition) are deleted, in batches of
 * `batchSize` through its `received_at` index. Nothing is written per installation: a poll tells
 * a gap from the positions missing. Quota counters of days past the horizon go too.
 *
 * One process at a time: every step is a short transaction holding a transaction-level advisory
 * lock, which Postgres releases with the transaction whatever happens to the connection. A run
 * that finds the lock taken stops; one that never got it did nothing (`ran: false`).
 */
export async function removeExpiredEvents(sql: Sql, options: { horizon: Date; batchSize?: number }): Promise<RetentionRun> {
  const batchSize = options.batchSize ?? 5000;
  const horizon = options.horizon.toISOString();
  const started = await underLock(
    sql,
    (tx) => tx`
      insert into event_retention (singleton, kept_since) values (true, ${horizon}::timestamptz)
      on conflict (singleton) do update set kept_since = excluded.kept_since, updated_at = now()`,
  );
  if (!started) return { ran: false, removed: 0 };

  let removed = 0;
  for (;;) {
    // One statement is one transaction: the lock is taken, the batch removed and the lock
    // released together, with no transaction left open between round trips.
    const [row] = await sql<{ locked: boolean; removed: number }[]>`
      with lock as (
        select pg_try_advisory_xact_lock(${RETENTION_LOCK}) as locked
      ), removed as (
        delete from events_default
         where (select locked from lock)
           and ctid = any(array(
             select ctid from events_default where received_at < ${horizon}::timestamptz order by received_at limit ${batchSize}
           ))
        returning 1
      )
      select (select locked from lock) as locked, (select count(*)::int from removed) as removed`;
    if (!row?.locked) return { ran: true, removed };
    removed += row.removed;
    if (row.removed < batchSize) break;
  }
  await forgetUsageBefore(sql, horizon.slice(0, 10), batchSize);
  return { ran: true, removed };
}

export interface DroppedDays {
  /** False when another process held the lock and nothing was dropped. */
  readonly ran: boolean;
  /** The days dropped (`YYYY-MM-DD`; `before-YYYY-MM-DD` for the partition an upgrade made of the old table). */
  readonly days: string[];
}

/**
 * Drops each partition of `events` wholly before `horizon`: constant time whatever it holds, no
 * dead tuples, no WAL per row. A day still holding events inside the horizon stays until it is
 * wholly past (its older events are already not served, see removeExpiredEvents).
 *
 * A day is first detached, in a short transaction that needs `events` to itself for a moment (it
 * waits at most DROP_LOCK_TIMEOUT for statements on `events` to finish, DROP_ATTEMPTS times; a
 * day it could not detach is tried by the next run); detaching changes only the catalog. The
 * table is then dropped in a transaction of its own: removing a day's files (a gigabyte at a
 * million events) holds the lock of that table alone, which no query on `events` needs any more,
 * so ingest and polls never wait for it. A day detached by a run that stopped before dropping it
 * (the only way a day table stands outside `events`: partitions are created and attached in one
 * transaction) is dropped by the next run.
 */
export async function dropExpiredDays(sql: Sql, horizon: Date): Promise<DroppedDays> {
  const listed = await underLock(
    sql,
    (tx) => tx<{ name: string; upper: Date | null; attached: boolean }[]>`
      select c.relname as name, b.upper, true as attached
        from pg_inherits h
        join pg_class c on c.oid = h.inhrelid
        cross join lateral omb_event_partition_bounds(c.oid) b
       where h.inhparent = 'events'::regclass and b.upper <= ${horizon.toISOString()}::timestamptz
      union all
      select c.relname, null, false
        from pg_class c
       where c.relnamespace = 'public'::regnamespace and c.relkind = 'r'
         and (c.relname ~ '^events_p[0-9]{8}$' or c.relname = 'events_before_days')
         and not exists (select 1 from pg_inherits h where h.inhrelid = c.oid)
       order by 3, 2`,
  );
  if (!listed) return { ran: false, days: [] };
  const days: string[] = [];
  for (const partition of listed.value) {
    if (partition.attached && !(await detachPartition(sql, partition.name))) break;
    const dropped = await underLock(sql, (tx) => tx`drop table if exists ${tx(partition.name)}`);
    if (!dropped) break;
    days.push(dayOf(partition.name, partition.upper));
  }
  return { ran: true, days };
}

/** True once the partition stands outside `events`; false when the retention lock or `events` could not be had. */
async function detachPartition(sql: Sql, name: string): Promise<boolean> {
  for (let attempt = 1; ; attempt++) {
    try {
      const detached = await underLock(sql, async (tx) => {
        await tx.unsafe(`set local lock_timeout = '${DROP_LOCK_TIMEOUT}'`);
        await tx`alter table events detach partition ${tx(name)}`;
      });
      return detached !== undefined;
    } catch (error) {
      if ((error as { code?: string }).code !== LOCK_NOT_AVAILABLE) throw error;
      if (attempt === DROP_ATTEMPTS) return false;
      await new Promise((resolve) => setTimeout(resolve, DROP_RETRY_MS));
    }
  }
}

/** `events_p20320101` → `2032-01-01`; another partition by the day it ends before (`before-days` when no longer known). */
function dayOf(name: string, upper: Date | null): string {
  const match = /^events_p(\d{4})(\d{2})(\d{2})$/.exec(name);
  if (match) return `${match[1]}-${match[2]}-${match[3]}`;
  return upper ? `before-${new Date(upper).toISOString().slice(0, 10)}` : 'before-days';
}

export type RetentionJob = RepeatingJob;

/**
 * The events table's upkeep, every `intervalMs` (a minute by default): day partitions created
 * ahead from the clock's today (ensureEventPartitions), then `removeExpiredEvents` with the
 * horizon `retentionDays` before the clock's now. No external scheduler is needed. Runs never
 * overlap; failures are logged and retried at the next tick.
 */
export function startRetentionJob(options: {
  sql: Sql;
  clock: Clock;
  logger: Logger;
  retentionDays: number;
  intervalMs?: number;
  batchSize?: number;
}): RetentionJob {
  const log = options.logger.child({ component: 'event-retention' });
  const intervalMs = options.intervalMs ?? 60_000;
  const tick = async () => {
    const startedAt = Date.now();
    const now = options.clock.now();
    try {
      const created = await ensureEventPartitions(options.sql, now);
      if (created) log.info({ created }, 'day partitions created');
    } catch (err) {
      log.warn({ err }, 'creating day partitions failed; retrying at the next run');
    }
    try {
      const horizon = new Date(now.getTime() - options.retentionDays * DAY_MS);
      const run = await removeExpiredEvents(options.sql, { horizon, batchSize: options.batchSize });
      const dropped = await dropExpiredDays(options.sql, horizon);
      if (run.removed > 0 || dropped.days.length > 0)
        log.info({ removed: run.removed, droppedDays: dropped.days, ms: Date.now() - startedAt }, 'expired events removed');
    } catch (err) {
      log.warn({ err }, 'removing expired events failed; retrying at the next run');
    }
  };
  return startRepeatingJob(tick, { intervalMs, firstDelayMs: FIRST_RUN_DELAY_MS });
}
