import { describe, expect, it } from 'vitest';
import { type Budget, BudgetExhausted } from './call-budget.js';
import { FairQueue } from './fair-queue.js';

/**
 * A budget that grants one token each time the test says so. A call that will not wait
 * (`maxWaitMs` 0) gets one of the tokens the test left in the bucket, or is refused.
 */
function handBudget() {
  const waiting: Array<() => void> = [];
  const taken: Array<{ keepReserve: boolean }> = [];
  const state = { inBucket: 0 };
  const budget: Budget = {
    acquire: (_cost, maxWaitMs, keepReserve = false) => {
      taken.push({ keepReserve });
      if (maxWaitMs === 0) {
        if (state.inBucket === 0) return Promise.reject(new BudgetExhausted(10));
        state.inBucket -= 1;
        return Promise.resolve();
      }
      return new Promise<void>((resolve) => waiting.push(resolve));
    },
    pause: () => {},
  };
  return {
    budget,
    taken,
    state,
    async grant(n = 1) {
      for (let i = 0; i < n; i++) {
        await until(() => waiting.length > 0);
        waiting.shift()!();
        await new Promise((resolve) => setImmediate(resolve));
      }
    },
  };
}

async function until(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 1000 && !condition(); i++) await new Promise((resolve) => setImmediate(resolve));
}

describe('FairQueue', () => {
  it('gives the next token to the caller that used the least lately, not to the oldest call', async () => {
    const { budget, grant } = handBudget();
    const queue = new FairQueue(budget);
    const served: string[] = [];
    const far = performance.now() + 60_000;
    const take = (flow: string, n: number) => queue.take(flow, 1, far).then(() => served.push(`${flow}${n}`));

    const flood = [1, 2, 3, 4, 5].map((n) => take('flooder', n));
    await grant(2);
    const victim = take('victim', 1);
    await grant(4);
    await Promise.all([...flood, victim]);
    // The victim's call arrived behind three of the flooder's queued calls; it waited only for
    // the one already taking its token, then went first.
    expect(served).toEqual(['flooder1', 'flooder2', 'flooder3', 'victim1', 'flooder4', 'flooder5']);
  });

  it('lets a caller under its share take a token left in reserve at once, while the backlog waits for the refill', async () => {
    const { budget, grant, taken, state } = handBudget();
    const queue = new FairQueue(budget);
    const served: string[] = [];
    const far = performance.now() + 60_000;
    const take = (flow: string, n: number) => queue.take(flow, 1, far).then(() => served.push(`${flow}${n}`));

    const flood = [1, 2, 3, 4].map((n) => take('flooder', n));
    await grant(1);
    // The backlog waits for its tokens leaving the reserve alone; the reserve holds one now.
    state.inBucket = 1;
    await take('victim', 1);
    expect(served).toEqual(['flooder1', 'victim1']);
    // The backlog asked for its tokens keeping the reserve; the victim took its token from it.
    expect(taken.filter((t) => t.keepReserve).length).toBeGreaterThan(0);
    await grant(3);
    await Promise.all(flood);
    expect(served).toEqual(['flooder1', 'victim1', 'flooder2', 'flooder3', 'flooder4']);
  });

  it("keeps each caller's own calls in order", async () => {
    const { budget, grant } = handBudget();
    const queue = new FairQueue(budget);
    const served: string[] = [];
    const far = performance.now() + 60_000;
    const all = ['a1', 'b1', 'a2', 'b2', 'a3'].map((id) => queue.take(id[0]!, 1, far).then(() => served.push(id)));
    await grant(5);
    await Promise.all(all);
    expect(served.filter((id) => id.startsWith('a'))).toEqual(['a1', 'a2', 'a3']);
    expect(served.filter((id) => id.startsWith('b'))).toEqual(['b1', 'b2']);
  });

  it('refuses a call still queued at its deadline, and one whose caller gave up', async () => {
    const { budget, grant } = handBudget();
    const queue = new FairQueue(budget);
    const first = queue.take('a', 1, performance.now() + 60_000);
    const late = queue.take('a', 1, performance.now() + 20);
    const caller = new AbortController();
    const abandoned = queue.take('b', 1, performance.now() + 60_000, caller.signal);
    const refusedAbandoned = expect(abandoned).rejects.toThrow('client gone');
    caller.abort(new Error('client gone'));
    await refusedAbandoned;
    await expect(late).rejects.toBeInstanceOf(BudgetExhausted);
    await grant(1);
    await first;
    expect(queue.waiting).toBe(0);
  });
});
