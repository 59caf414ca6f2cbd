import { and, eq, sum } from 'drizzle-orm';
import type { Db, Sql } from '../db/database.js';
import { dailyUsage } from '../db/schema.js';

/**
 * Kept and skipped events per installation per UTC day: what the quota counts. The counting
 * itself happens inside webhook ingest's database function, under the installation's lock
 * (migrations/functions/omb_ingest_trigger_message.sql); everything else that touches
 * `daily_usage` is here.
 */
export interface DayUsage {
  readonly kept: number;
  readonly skipped: number;
}

/** One installation's use of its quota on `day` (`YYYY-MM-DD`). */
export async function usageOn(db: Db, installationId: string, day: string): Promise<DayUsage> {
  const [row] = await db
    .select({ kept: dailyUsage.kept, skipped: dailyUsage.skipped })
    .from(dailyUsage)
    .where(and(eq(dailyUsage.installationId, installationId), eq(dailyUsage.day, day)));
  return { kept: row?.kept ?? 0, skipped: row?.skipped ?? 0 };
}

/** Every installation's events on `day`, added up. */
export async function totalUsageOn(db: Db, day: string): Promise<DayUsage> {
  const [row] = await db
    .select({ kept: sum(dailyUsage.kept).mapWith(Number), skipped: sum(dailyUsage.skipped).mapWith(Number) })
    .from(dailyUsage)
    .where(eq(dailyUsage.day, day));
  return { kept: row?.kept ?? 0, skipped: row?.skipped ?? 0 };
}

/**
 * Removes the counts of days before `horizonDay`, which answer nothing any more (`today` and
 * `/v1/me` read only the current day), in batches of `batchSize`. The per-trigger counts go too.
 */
export async function forgetUsageBefore(sql: Sql, horizonDay: string, batchSize: number): Promise<void> {
  for (const table of ['daily_usage', 'trigger_daily_usage'] as const) {
    for (;;) {
      const [batch] = await sql<{ removed: number }[]>`
        with removed as (
          delete from ${sql(table)}
           where ctid = any(array(select ctid from ${sql(table)} where day < ${horizonDay}::date limit ${batchSize}))
          returning 1
        )
        select count(*)::int as removed from removed`;
      if ((batch?.removed ?? 0) < batchSize) break;
    }
  }
}
