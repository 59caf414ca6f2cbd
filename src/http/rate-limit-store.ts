import type { FastifyRateLimitStore, FastifyRateLimitStoreCtor } from '@fastify/rate-limit';
import type { SharedCounters } from '../db/counters.js';

type Callback = Parameters<FastifyRateLimitStore['incr']>[1];

const MAX_REMEMBERED = 100_000;

/**
 * `@fastify/rate-limit`'s store backed by the shared counters: every process counts in the same
 * Postgres rows, so a route's limit holds across replicas. Each route keeps its own counters
 * (as the plugin's in-memory store does), keyed `<METHOD> <route>|<key>`.
 *
 * A key found over its limit is refused by this process without asking Postgres again until its
 * window ends: within a fixed window the shared count only grows, so that answer is the one
 * Postgres would give, and a client hammering past its limit costs no more database work.
 */
export function sharedRateLimitStore(counters: SharedCounters): FastifyRateLimitStoreCtor {
  class SharedStore implements FastifyRateLimitStore {
    /** Keys over their limit in this window, with the `performance.now()` instant it ends. */
    private readonly over = new Map<string, { current: number; until: number }>();

    constructor(private readonly scope = '') {}

    incr(key: string, callback: Callback, timeWindow: number, max: number): void {
      const now = performance.now();
      const known = this.over.get(key);
      if (known && known.until > now) {
        callback(null, { current: known.current, ttl: Math.ceil(known.until - now) });
        return;
      }
      if (known) this.over.delete(key);
      counters.hit(`${this.scope}|${key}`, timeWindow).then(
        (count) => {
          if (count.current > max) this.remember(key, count.current, performance.now() + count.ttl);
          callback(null, count);
        },
        (error: unknown) => callback(error instanceof Error ? error : new Error(String(error))),
      );
    }

    read(key: string, callback: Callback): void {
      counters.read(`${this.scope}|${key}`).then(
        (count) => callback(null, count),
        (error: unknown) => callback(error instanceof Error ? error : new Error(String(error))),
      );
    }

    private remember(key: string, current: number, until: number): void {
      // Bounded: when many keys are over at once, forget the ended windows (or all of them).
      if (this.over.size >= MAX_REMEMBERED) {
        const now = performance.now();
        for (const [k, v] of this.over) if (v.until <= now) this.over.delete(k);
        if (this.over.size >= MAX_REMEMBERED) this.over.clear();
      }
      this.over.set(key, { current, until });
    }

    // The plugin passes the route's merged limit settings, the route itself under `routeInfo`.
    child(routeOptions: Parameters<FastifyRateLimitStore['child']>[0]): FastifyRateLimitStore {
      const info = (routeOptions as { routeInfo?: { method?: string | string[]; url?: string } }).routeInfo ?? {};
      const method = Array.isArray(info.method) ? info.method.join(',') : (info.method ?? '');
      return new SharedStore(`${method} ${info.url ?? ''}`);
    }
  }
  return SharedStore as unknown as FastifyRateLimitStoreCtor;
}
