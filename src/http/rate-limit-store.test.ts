import type { FastifyRateLimitStore } from '@fastify/rate-limit';
import { describe, expect, it } from 'vitest';
import type { SharedCounters, WindowCount } from '../db/counters.js';
import { sharedRateLimitStore } from './rate-limit-store.js';

/** Counters in memory, answering a little later as Postgres would, that count the trips made to them. */
function countingCounters(windowMs: number) {
  const windows = new Map<string, { hits: number; endsAt: number }>();
  const trips = { hit: 0 };
  const counters: SharedCounters = {
    async hit(key) {
      trips.hit++;
      await new Promise((resolve) => setTimeout(resolve, 2));
      const now = performance.now();
      let window = windows.get(key);
      if (!window || window.endsAt <= now) {
        window = { hits: 0, endsAt: now + windowMs };
        windows.set(key, window);
      }
      window.hits++;
      return { current: window.hits, ttl: Math.ceil(window.endsAt - now) };
    },
    async read() {
      return { current: 0, ttl: 0 };
    },
  };
  return { counters, trips };
}

function storeOver(counters: SharedCounters): FastifyRateLimitStore {
  const Store = sharedRateLimitStore(counters);
  const root = new (Store as unknown as new () => FastifyRateLimitStore)();
  return root.child({ routeInfo: { method: 'GET', url: '/v1/me' } } as never);
}

function hit(store: FastifyRateLimitStore, key: string, windowMs: number, max: number): Promise<WindowCount> {
  return new Promise((resolve, reject) =>
    store.incr(key, (error, count) => (error ? reject(error) : resolve(count as WindowCount)), windowMs, max),
  );
}

describe('the shared limiter store', () => {
  it('sends at most `max` hits of a flood to Postgres, and refuses the rest here', async () => {
    const { counters, trips } = countingCounters(60_000);
    const store = storeOver(counters);
    const answers = await Promise.all(Array.from({ length: 1000 }, () => hit(store, 'token:a', 60_000, 5)));
    expect(trips.hit).toBe(5);
    expect(answers.filter((a) => a.current <= 5)).toHaveLength(5);
    expect(answers.filter((a) => a.current > 5)).toHaveLength(995);
    expect(answers.every((a) => a.ttl > 0 && a.ttl <= 60_000)).toBe(true);

    // Later hits within the window cost nothing either; another key is counted on its own.
    expect((await hit(store, 'token:a', 60_000, 5)).current).toBeGreaterThan(5);
    expect(trips.hit).toBe(5);
    expect((await hit(store, 'token:b', 60_000, 5)).current).toBe(1);
    expect(trips.hit).toBe(6);
  });

  it('lets a key through again once its window has ended', async () => {
    const { counters, trips } = countingCounters(50);
    const store = storeOver(counters);
    await Promise.all(Array.from({ length: 20 }, () => hit(store, 'k', 50, 2)));
    expect(trips.hit).toBe(2);
    await new Promise((resolve) => setTimeout(resolve, 80));
    expect((await hit(store, 'k', 50, 2)).current).toBe(1);
    expect(trips.hit).toBe(3);
  });

  it('counts every hit in Postgres while the key is under its limit', async () => {
    const { counters, trips } = countingCounters(60_000);
    const store = storeOver(counters);
    const answers = await Promise.all(Array.from({ length: 30 }, () => hit(store, 'k', 60_000, 30)));
    expect(trips.hit).toBe(30);
    expect(answers.map((a) => a.current).sort((x, y) => x - y)).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));
  });

  it('sends held hits on when the first answers fail', async () => {
    let failures = 2;
    const { counters, trips } = countingCounters(60_000);
    const flaky: SharedCounters = {
      hit: (key, windowMs) => (failures-- > 0 ? Promise.reject(new Error('database unavailable')) : counters.hit(key, windowMs)),
      read: counters.read,
    };
    const store = storeOver(flaky);
    const answers = await Promise.allSettled(Array.from({ length: 6 }, () => hit(store, 'k', 60_000, 2)));
    expect(answers.filter((a) => a.status === 'rejected')).toHaveLength(2);
    const counted = answers.flatMap((a) => (a.status === 'fulfilled' ? [a.value.current] : []));
    expect(counted.filter((c) => c <= 2)).toHaveLength(2);
    expect(counted.filter((c) => c > 2)).toHaveLength(2);
    expect(trips.hit).toBe(2);
  });
});
