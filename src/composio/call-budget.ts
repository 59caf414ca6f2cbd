import { setTimeout as delay } from 'node:timers/promises';

/**
 * The broker's budget for calls to Composio. The whole broker shares one Composio project
 * whose rate limit is organisation-wide, so every HTTP request to Composio takes a token from
 * this one bucket, and a 429 pauses everybody until Composio's `retry-after` has passed.
 *
 * Token bucket with reservations: a caller takes its tokens at once (the balance may go
 * negative, which is the queue ahead of the next caller), then sleeps until the refill has
 * paid for them. That keeps callers in arrival order without a queue structure.
 */
export interface CallBudgetOptions {
  readonly callsPerMinute: number;
  /** A caller that would wait longer than this for its turn is refused at once instead. */
  readonly maxWaitMs: number;
  readonly now?: () => number;
  readonly sleep?: (ms: number) => Promise<void>;
}

/** Thrown by `acquire` when the wait would exceed `maxWaitMs`. */
export class BudgetExhausted extends Error {
  constructor(readonly retryAfterMs: number) {
    super(`no Composio call budget for ${Math.ceil(retryAfterMs / 1000)} s`);
    this.name = 'BudgetExhausted';
  }
}

/** What the call core needs of a budget: this process's own (`CallBudget`) or the shared one. */
export interface Budget {
  /**
   * Waits for `cost` calls' worth of budget, or throws `BudgetExhausted` when that would take
   * longer than `maxWaitMs`. With `keepReserve` the caller waits until `reserveTokens` are left
   * beside its own, so callers using less than their share find a token at once (the fair
   * queue's backlog takes the budget with `keepReserve`).
   */
  acquire(cost: number, maxWaitMs?: number, keepReserve?: boolean): Promise<void>;
  /** Composio answered 429: nobody calls before `retryAfterMs` has passed. */
  pause(retryAfterMs: number): void | Promise<void>;
}

/**
 * Tokens a backlog leaves in the bucket for callers under their share: a tenth of a second of
 * budget (at least one, at most a quarter of the burst).
 */
export function reserveTokens(callsPerMinute: number): number {
  const capacity = Math.max(1, Math.ceil(callsPerMinute / 6));
  return Math.max(1, Math.min(Math.floor(capacity / 4), Math.ceil(callsPerMinute / 600)));
}

/** The in-memory budget: exact for one process only (tests, the operator CLI). */
export class CallBudget implements Budget {
  private readonly capacity: number;
  private readonly tokensPerMs: number;
  private readonly reserve: number;
  private readonly maxWaitMs: number;
  private readonly now: () => number;
  private readonly sleep: (ms: number) => Promise<void>;
  private tokens: number;
  /** Refill accrues from this instant; during a pause it lies in the future. */
  private refilledAt: number;
  private pausedUntil = 0;

  constructor(options: CallBudgetOptions) {
    if (!(options.callsPerMinute > 0)) throw new RangeError('callsPerMinute must be positive');
    // A ten-second share as the burst: enough for a page sweep, small enough that a burst
    // cannot spend a whole minute's organisation-wide allowance in one go.
    this.capacity = Math.max(1, Math.ceil(options.callsPerMinute / 6));
    this.tokensPerMs = options.callsPerMinute / 60_000;
    this.reserve = reserveTokens(options.callsPerMinute);
    this.maxWaitMs = options.maxWaitMs;
    this.now = options.now ?? (() => performance.now());
    this.sleep = options.sleep ?? ((ms) => delay(ms));
    this.tokens = this.capacity;
    this.refilledAt = this.now();
  }

  /** Waits for `cost` calls' worth of budget, or throws `BudgetExhausted` without waiting. */
  async acquire(cost = 1, maxWaitMs = this.maxWaitMs, keepReserve = false): Promise<void> {
    const start = this.now();
    this.refill(start);
    this.tokens -= cost;
    const floor = keepReserve ? this.reserve : 0;
    const readyAt = Math.max(start, this.refilledAt, this.pausedUntil) + Math.max(0, floor - this.tokens) / this.tokensPerMs;
    const wait = readyAt - start;
    if (wait > maxWaitMs) {
      this.tokens += cost;
      throw new BudgetExhausted(wait);
    }
    if (wait > 0) await this.sleep(wait);
    // A 429 may have arrived while this caller slept: honour the pause it set.
    const deadline = start + maxWaitMs;
    for (let now = this.now(); this.pausedUntil > now; now = this.now()) {
      if (this.pausedUntil > deadline) throw new BudgetExhausted(this.pausedUntil - now);
      await this.sleep(this.pausedUntil - now);
    }
  }

  /**
   * Composio said 429: nobody calls before `retryAfterMs` has passed, and the bucket starts
   * empty afterwards so calls resume at the steady rate instead of as a burst.
   */
  pause(retryAfterMs: number): void {
    const now = this.now();
    this.refill(now);
    this.pausedUntil = Math.max(this.pausedUntil, now + Math.max(0, retryAfterMs));
    this.tokens = Math.min(this.tokens, 0);
    this.refilledAt = Math.max(this.refilledAt, this.pausedUntil);
  }

  private refill(now: number): void {
    if (now <= this.refilledAt) return;
    this.tokens = Math.min(this.capacity, this.tokens + (now - this.refilledAt) * this.tokensPerMs);
    this.refilledAt = now;
  }
}
