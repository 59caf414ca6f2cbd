import type { Sql } from './database.js';

/**
 * Fixed-window counters every broker process shares (the UNLOGGED `rate_limit_counters`), so a
 * limit of 30 a minute is 30 a minute whatever the number of replicas. One upsert per counted
 * request; windows are timed by Postgres's clock, so processes whose clocks differ still agree.
 */
export interface WindowCount {
  /** Hits in the current window, this one included. */
  readonly current: number;
  /** Milliseconds until the window ends. */
  readonly ttl: number;
}

/** Expired windows are swept at most this often, by whichever process counts next. */
const SWEEP_EVERY_MS = 60_000;

export interface SharedCounters {
  /** Counts one hit for `key` in its `windowMs` window and says where the window stands. */
  hit(key: string, windowMs: number): Promise<WindowCount>;
  /** The window as it stands, without counting (an absent or ended window is `{0, 0}`). */
  read(key: string): Promise<WindowCount>;
}

export function sharedCounters(sql: Sql, now: () => number = () => performance.now()): SharedCounters {
  let sweptAt = now();

  function sweep(): void {
    if (now() - sweptAt < SWEEP_EVERY_MS) return;
    sweptAt = now();
    // Not awaited: a failed sweep is retried a minute later and costs the request nothing.
    sql`delete from rate_limit_counters where resets_at < now() - interval '1 minute'`.catch(() => {});
  }

  return {
    async hit(key, windowMs) {
      sweep();
      const [row] = await sql<{ current: number; ttl: number }[]>`
        insert into rate_limit_counters as c (key, hits, resets_at)
        values (${key}, 1, now() + ${windowMs} * interval '1 millisecond')
        on conflict (key) do update set
          hits = case when c.resets_at <= now() then 1 else c.hits + 1 end,
          resets_at = case when c.resets_at <= now() then excluded.resets_at else c.resets_at end
        -- At most the window: a hit whose transaction began before a concurrent first hit's
        -- (which set resets_at from its own, later now()) would otherwise answer a longer wait.
        returning hits as current,
          least(${windowMs}, greatest(0, ceil(extract(epoch from (resets_at - now())) * 1000)))::int as ttl`;
      return { current: row!.current, ttl: row!.ttl };
    },

    async read(key) {
      const [row] = await sql<{ current: number; ttl: number }[]>`
        select hits as current, ceil(extract(epoch from (resets_at - now())) * 1000)::int as ttl
          from rate_limit_counters where key = ${key} and resets_at > now()`;
      return row ? { current: row.current, ttl: row.ttl } : { current: 0, ttl: 0 };
    },
  };
}
