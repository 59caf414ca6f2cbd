import { createHash } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import type { Sql } from '../db/database.js';
import { type Budget, BudgetExhausted, reserveTokens } from './call-budget.js';

/**
 * The Composio call budget shared by every broker process using one project key: the same
 * token bucket with reservations as `CallBudget`, kept in one row of the UNLOGGED
 * `composio_budgets` table and updated atomically, timed by Postgres's clock. A 429's
 * `retry-after` is written to the row, so every process pauses.
 *
 * One round trip per call (two when the call had to wait, to see a pause that arrived meanwhile).
 */
export interface SharedBudgetOptions {
  readonly sql: Sql;
  /** The project's API key; only a digest of it is stored. */
  readonly apiKey: string;
  readonly callsPerMinute: number;
  readonly maxWaitMs: number;
  readonly sleep?: (ms: number) => Promise<void>;
}

export function projectDigest(apiKey: string): string {
  return createHash('sha256').update(`omb-composio-budget:${apiKey}`).digest('hex').slice(0, 32);
}

export function sharedCallBudget(options: SharedBudgetOptions): Budget {
  const { sql } = options;
  const project = projectDigest(options.apiKey);
  // As CallBudget: a ten-second share as the burst.
  const capacity = Math.max(1, Math.ceil(options.callsPerMinute / 6));
  const tokensPerMs = options.callsPerMinute / 60_000;
  const reserveFloor = reserveTokens(options.callsPerMinute);
  const sleep = options.sleep ?? ((ms: number) => delay(ms));

  /** Takes `cost` tokens (the balance may go negative: the queue ahead) and says how long to wait for them. */
  async function reserve(cost: number, floor: number): Promise<{ waitMs: number }> {
    const [row] = await sql<{ wait_ms: number }[]>`
      insert into composio_budgets as b (project, tokens, refilled_at, paused_until)
      values (${project}, ${capacity - cost}, now(), now())
      on conflict (project) do update set
        tokens = least(${capacity}::float8,
                       b.tokens + greatest(0, extract(epoch from (now() - b.refilled_at)) * 1000) * ${tokensPerMs}::float8)
                 - ${cost}::float8,
        refilled_at = greatest(b.refilled_at, now())
      returning greatest(0, extract(epoch from (greatest(refilled_at, paused_until) - now())) * 1000)
              + greatest(0, ${floor}::float8 - tokens) / ${tokensPerMs}::float8 as wait_ms`;
    return { waitMs: Number(row!.wait_ms) };
  }

  async function pausedForMs(): Promise<number> {
    const [row] = await sql<{ ms: number }[]>`
      select greatest(0, extract(epoch from (paused_until - now())) * 1000)::float8 as ms
        from composio_budgets where project = ${project}`;
    return Number(row?.ms ?? 0);
  }

  return {
    async acquire(cost = 1, maxWaitMs = options.maxWaitMs, keepReserve = false) {
      const started = performance.now();
      const { waitMs } = await reserve(cost, keepReserve ? reserveFloor : 0);
      if (waitMs > maxWaitMs) {
        await sql`update composio_budgets set tokens = tokens + ${cost}::float8 where project = ${project}`;
        throw new BudgetExhausted(waitMs);
      }
      if (waitMs <= 0) return;
      await sleep(waitMs);
      // A 429 may have arrived (on any process) while this caller slept: honour the pause it set.
      const deadline = started + maxWaitMs;
      for (let paused = await pausedForMs(); paused > 0; paused = await pausedForMs()) {
        if (performance.now() + paused > deadline) throw new BudgetExhausted(paused);
        await sleep(paused);
      }
    },

    async pause(retryAfterMs) {
      const ms = Math.max(0, retryAfterMs);
      await sql`
        insert into composio_budgets as b (project, tokens, refilled_at, paused_until)
        values (${project}, 0, now() + ${ms} * interval '1 millisecond', now() + ${ms} * interval '1 millisecond')
        on conflict (project) do update set
          tokens = least(0, least(${capacity}::float8,
                   b.tokens + greatest(0, extract(epoch from (now() - b.refilled_at)) * 1000) * ${tokensPerMs}::float8)),
          paused_until = greatest(b.paused_until, excluded.paused_until),
          refilled_at = greatest(b.refilled_at, b.paused_until, excluded.paused_until)`;
    },
  };
}
