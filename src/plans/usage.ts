import { and, between, eq, sql, sum } from 'drizzle-orm';
import type { Db, Sql } from '../db/database.js';
import { dailyUsage } from '../db/schema.js';

/**
 * Kept and skipped events per installation per UTC day: what the quota counts. The counting
 * itself happens inside the database, under the installation's lock: the ingest functions count
 * kept and skipped events into `daily_usage` and each trigger's into `trigger_daily_usage`
 * (migrations/functions/omb_ingest_*.sql), and omb_queue_trigger_test counts test events. Every
 * other read and write of `daily_usage` is here, and so is the pruning of both tables.
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

/** One installation's counts on `day`, test events included, and over `from` through `day`: the operators' lookup. */
export interface RecentUsage {
  readonly today: DayUsage & { readonly tests: number };
  readonly days: DayUsage;
}

export async function recentUsage(db: Db, installationId: string, from: string, day: string): Promise<RecentUsage> {
  const onDay = sql`${dailyUsage.day} = ${day}::date`;
  const [row] = await db
    .select({
      keptToday: sql<number>`coalesce(sum(${dailyUsage.kept}) filter (where ${onDay}), 0)::int`.mapWith(Number),
      skippedToday: sql<number>`coalesce(sum(${dailyUsage.skipped}) filter (where ${onDay}), 0)::int`.mapWith(Number),
      testsToday: sql<number>`coalesce(sum(${dailyUsage.testEvents}) filter (where ${onDay}), 0)::int`.mapWith(Number),
      kept: sql<number>`coalesce(sum(${dailyUsage.kept}), 0)::int`.mapWith(Number),
      skipped: sql<number>`coalesce(sum(${dailyUsage.skipped}), 0)::int`.mapWith(Number),
    })
    .from(dailyUsage)
    .where(and(eq(dailyUsage.installationId, installationId), between(dailyUsage.day, from, day)));
  return {
    today: { kept: row?.keptToday ?? 0, skipped: row?.skippedToday ?? 0, tests: row?.testsToday ?? 0 },
    days: { kept: row?.kept ?? 0, skipped: row?.skipped ?? 0 },
  };
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
