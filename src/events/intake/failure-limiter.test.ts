import { describe, expect, it } from 'vitest';
import type { SharedCounters, WindowCount } from '../../db/counters.js';
import { FailureLimiter } from './failure-limiter.js';

/** Shared counters in memory, counting how often they are asked. */
function countingCounters() {
  const hits = new Map<string, number>();
  const calls = { hit: 0, read: 0 };
  const counters: SharedCounters = {
    async hit(key): Promise<WindowCount> {
      calls.hit++;
      const current = (hits.get(key) ?? 0) + 1;
      hits.set(key, current);
      return { current, ttl: 30_000 };
    },
    async read(key): Promise<WindowCount> {
      calls.read++;
      return { current: hits.get(key) ?? 0, ttl: 30_000 };
    },
  };
  return { counters, calls, hits };
}

describe('FailureLimiter', () => {
  it('asks the shared counters only about failures, never about a request that may go on', async () => {
    const { counters, calls } = countingCounters();
    const limiter = new FailureLimiter(counters, 3, 60_000, () => 0);
    for (let i = 0; i < 1000; i++) expect(limiter.retryAfterSeconds('10.0.0.1')).toBe(0);
    expect(calls).toEqual({ hit: 0, read: 0 });
    await limiter.recordFailure('10.0.0.1');
    expect(calls).toEqual({ hit: 1, read: 0 });
  });

  it('refuses an address from memory once its failures reach the limit, until its window ends', async () => {
    const { counters } = countingCounters();
    let now = 0;
    const limiter = new FailureLimiter(counters, 3, 60_000, () => now);
    expect(await limiter.recordFailure('10.0.0.1')).toBe(0);
    expect(await limiter.recordFailure('10.0.0.1')).toBe(0);
    expect(limiter.retryAfterSeconds('10.0.0.1')).toBe(0);
    // The third failure is still answered as a failure; the address is refused from then on.
    expect(await limiter.recordFailure('10.0.0.1')).toBe(0);
    expect(limiter.retryAfterSeconds('10.0.0.1')).toBe(30);
    expect(limiter.retryAfterSeconds('10.0.0.2')).toBe(0);
    now = 29_500;
    expect(limiter.retryAfterSeconds('10.0.0.1')).toBe(1);
    now = 30_000;
    expect(limiter.retryAfterSeconds('10.0.0.1')).toBe(0);
  });

  it('answers a failure counted beyond the limit elsewhere as over the limit', async () => {
    const { counters, hits } = countingCounters();
    // Another process counted three failures from this address already.
    hits.set('bad-webhook-signature|10.0.0.1', 3);
    const limiter = new FailureLimiter(counters, 3, 60_000, () => 0);
    expect(limiter.retryAfterSeconds('10.0.0.1')).toBe(0);
    expect(await limiter.recordFailure('10.0.0.1')).toBe(30);
    expect(limiter.retryAfterSeconds('10.0.0.1')).toBe(30);
  });
});
