import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { Sql } from '../db/database.js';
import { forgetUsageBefore } from '../plans/usage.js';

/** Any fixed number: the lock that lets one broker process at a time remove expired events. */
const RETENTION_LOCK = 7_262_011_002;
const DAY_MS = 86_400_000;
const FIRST_RUN_DELAY_MS = 10_000;

export interface RetentionRun {
  /** False when another process held the lock and this run did nothing. */
  readonly ran: boolean;
  readonly removed: number;
}

/**
 * Removes events received before `horizon`, acknowledged or not, in batches of `batchSize` taken
 * from the `received_at` index. Each batch is its own short transaction, so the cost does not
 * grow with the table and ingest (which never touches old rows) is not held up. How far each
 * installation's queue was removed is recorded in `event_expiry`, so a poll from an older cursor
 * can say `gap: true`.
 *
 * One process at a time: every batch takes a transaction-level advisory lock, which Postgres
 * releases with the statement's transaction, whatever happens to the connection. A run that
 * finds the lock taken stops; one that never got it did nothing (`ran: false`).
 */
export async function removeExpiredEvents(sql: Sql, options: { horizon: Date; batchSize?: number }): Promise<RetentionRun> {
  const batchSize = options.batchSize ?? 5000;
  const horizon = options.horizon.toISOString();
  let removed = 0;
  for (let batch = 0; ; batch += 1) {
    // One statement is one transaction: the lock is taken, the batch removed and the lock
    // released together, with no transaction left open between round trips.
    const [row] = await sql<{ locked: boolean; removed: number }[]>`
      with lock as (
        select pg_try_advisory_xact_lock(${RETENTION_LOCK}) as locked
      ), removed as (
        delete from events
         where (select locked from lock)
           and ctid = any(array(
             select ctid from events where received_at < ${horizon}::timestamptz order by received_at limit ${batchSize}
           ))
        returning installation_id, position
      ), expired as (
        insert into event_expiry (installation_id, expired_through_position)
        select installation_id, max(position) from removed group by installation_id
        on conflict (installation_id) do update
          set expired_through_position = greatest(event_expiry.expired_through_position, excluded.expired_through_position),
              updated_at = now()
      )
      select (select locked from lock) as locked, (select count(*)::int from removed) as removed`;
    if (!row?.locked) return batch === 0 ? { ran: false, removed: 0 } : { ran: true, removed };
    removed += row.removed;
    if (row.removed < batchSize) break;
  }
  // Quota counters of days past the horizon go in the same bounded batches.
  await forgetUsageBefore(sql, horizon.slice(0, 10), batchSize);
  return { ran: true, removed };
}

export interface RetentionJob {
  stop(): Promise<void>;
}

/**
 * Runs `removeExpiredEvents` every `intervalMs` (a minute by default), with the horizon
 * `retentionDays` before the clock's now. Runs never overlap; failures are logged and retried
 * at the next tick.
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
  let stopped = false;
  let running: Promise<void> | undefined;
  let timer: NodeJS.Timeout | undefined;

  const tick = async () => {
    const startedAt = Date.now();
    try {
      const horizon = new Date(options.clock.now().getTime() - options.retentionDays * DAY_MS);
      const run = await removeExpiredEvents(options.sql, { horizon, batchSize: options.batchSize });
      if (run.removed > 0) log.info({ removed: run.removed, ms: Date.now() - startedAt }, 'expired events removed');
    } catch (err) {
      log.warn({ err }, 'removing expired events failed; retrying at the next run');
    }
  };
  const schedule = (delayMs: number) => {
    if (stopped) return;
    timer = setTimeout(() => {
      running = tick().finally(() => {
        running = undefined;
        schedule(intervalMs);
      });
    }, delayMs);
    timer.unref();
  };
  // Soon after start too, so a broker that restarts often still gets to run it.
  schedule(Math.min(intervalMs, FIRST_RUN_DELAY_MS));

  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
