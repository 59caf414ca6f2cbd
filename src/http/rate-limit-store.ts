import type { FastifyRateLimitStore, FastifyRateLimitStoreCtor } from '@fastify/rate-limit';
import type { SharedCounters } from '../db/counters.js';

type Callback = Parameters<FastifyRateLimitStore['incr']>[1];

/**
 * `@fastify/rate-limit`'s store backed by the shared counters: every process counts in the same
 * Postgres rows, so a route's limit holds across replicas. Each route keeps its own counters
 * (as the plugin's in-memory store does), keyed `<METHOD> <route>|<key>`.
 */
export function sharedRateLimitStore(counters: SharedCounters): FastifyRateLimitStoreCtor {
  class SharedStore implements FastifyRateLimitStore {
    constructor(private readonly scope = '') {}

    incr(key: string, callback: Callback, timeWindow: number): void {
      counters.hit(`${this.scope}|${key}`, timeWindow).then(
        (count) => callback(null, count),
        (error: unknown) => callback(error instanceof Error ? error : new Error(String(error))),
      );
    }

    read(key: string, callback: Callback): void {
      counters.read(`${this.scope}|${key}`).then(
        (count) => callback(null, count),
        (error: unknown) => callback(error instanceof Error ? error : new Error(String(error))),
      );
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
