import { describe, expect, it } from 'vitest';
import { BudgetExhausted, CallBudget } from '../../src/composio/call-budget.js';

/** The token bucket on a fake clock: sleeping advances time, so nothing here waits for real. */
function fakeBudget(callsPerMinute: number, maxWaitMs: number) {
  let now = 0;
  const sleeps: number[] = [];
  const budget = new CallBudget({
    callsPerMinute,
    maxWaitMs,
    now: () => now,
    sleep: async (ms) => {
      sleeps.push(ms);
      now += ms;
    },
  });
  return {
    budget,
    sleeps,
    advance: (ms: number) => {
      now += ms;
    },
  };
}

describe('CallBudget', () => {
  it('lets a ten-second share through at once, then paces at the configured rate', async () => {
    const { budget, sleeps } = fakeBudget(60, 60_000); // burst 10, then one a second
    for (let i = 0; i < 10; i++) await budget.acquire();
    expect(sleeps).toEqual([]);
    await budget.acquire();
    await budget.acquire();
    expect(sleeps).toEqual([1000, 1000]);
  });

  it('refills over time up to the burst size', async () => {
    const { budget, sleeps, advance } = fakeBudget(60, 60_000);
    for (let i = 0; i < 10; i++) await budget.acquire();
    advance(3_000);
    for (let i = 0; i < 3; i++) await budget.acquire();
    expect(sleeps).toEqual([]);
    advance(3_600_000);
    for (let i = 0; i < 10; i++) await budget.acquire();
    expect(sleeps).toEqual([]);
    await budget.acquire();
    expect(sleeps).toEqual([1000]);
  });

  it('charges calls that make several requests for each of them', async () => {
    const { budget, sleeps } = fakeBudget(60, 60_000);
    for (let i = 0; i < 5; i++) await budget.acquire(2);
    await budget.acquire(2);
    expect(sleeps).toEqual([2000]);
  });

  it('keeps callers in arrival order', async () => {
    let now = 0;
    const order: number[] = [];
    const timers: { at: number; resolve: () => void }[] = [];
    const budget = new CallBudget({
      callsPerMinute: 6, // burst 1, then one every 10 s
      maxWaitMs: 60_000,
      now: () => now,
      sleep: (ms) => new Promise((resolve) => timers.push({ at: now + ms, resolve })),
    });
    const calls = [1, 2, 3].map((n) => budget.acquire().then(() => order.push(n)));
    expect(timers.map((t) => t.at)).toEqual([10_000, 20_000]);
    // Caller 2 holds the 10 s slot and caller 3 the 20 s one; the clock fires them in time order.
    for (const timer of timers) {
      now = timer.at;
      timer.resolve();
      await Promise.resolve();
    }
    await Promise.all(calls);
    expect(order).toEqual([1, 2, 3]);
  });

  it('pauses everybody for retry-after, then resumes at the steady rate', async () => {
    const { budget, sleeps } = fakeBudget(600, 60_000); // burst 100, 100 ms apart
    budget.pause(5_000);
    await budget.acquire();
    await budget.acquire();
    expect(sleeps).toEqual([5_100, 100]);
  });

  it('refuses at once when the wait would exceed maxWaitMs, without spending budget', async () => {
    const { budget, sleeps } = fakeBudget(60, 2_000);
    budget.pause(30_000);
    await expect(budget.acquire()).rejects.toBeInstanceOf(BudgetExhausted);
    await expect(budget.acquire()).rejects.toMatchObject({ retryAfterMs: 31_000 });
    expect(sleeps).toEqual([]);
  });

  it('honours a pause that arrives while a caller is already waiting', async () => {
    let now = 0;
    const budget = new CallBudget({
      callsPerMinute: 6,
      maxWaitMs: 15_000,
      now: () => now,
      sleep: async (ms) => {
        now += ms;
        if (now === 10_000) budget.pause(20_000);
      },
    });
    await budget.acquire();
    // Reserved for t=10 s; a 429 at that moment pauses until t=30 s, beyond this caller's
    // deadline (t=15 s): it gives up rather than hang.
    await expect(budget.acquire()).rejects.toBeInstanceOf(BudgetExhausted);
  });

  it('rejects a non-positive rate', () => {
    expect(() => new CallBudget({ callsPerMinute: 0, maxWaitMs: 1 })).toThrow(RangeError);
  });
});
