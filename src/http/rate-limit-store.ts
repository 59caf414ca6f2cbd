import type { FastifyRateLimitStore, FastifyRateLimitStoreCtor } from '@fastify/rate-limit';
import type { SharedCounters } from '../db/counters.js';

type Callback = Parameters<FastifyRateLimitStore['incr']>[1];

const MAX_REMEMBERED = 100_000;

/** What this process knows of one key: its hits on their way to Postgres, and the last count it answered. */
interface KeyState {
  inFlight: number;
  /** The shared count as last answered, the `performance.now()` instant its window ends, and the ttl answered. */
  known: { current: number; until: number; ttl: number } | null;
  /** Hits held back until an answer says where the window stands (see `incr`). */
  held: Array<() => void>;
}

/**
 * `@fastify/rate-limit`'s store backed by the shared counters: every process counts in the same
 * Postgres rows, so a route's limit holds across replicas. Each route keeps its own counters
 * (as the plugin's in-memory store does), keyed `<METHOD> <route>|<key>`.
 *
 * A client hammering a key costs at most its limit in database work a window, however many
 * requests it sends at once: within a fixed window the shared count only grows, so once the
 * count this process last read plus its own hits still on their way reaches the limit, a
 * further hit is over whatever Postgres would say, and is refused here. Before any answer has
 * said where the window stands, at most `max` hits go to Postgres and the rest wait for the
 * first answer. (A hit refused here is not counted in Postgres: the count stays the one the
 * limit was reached at.)
 */
export function sharedRateLimitStore(counters: SharedCounters): FastifyRateLimitStoreCtor {
  class SharedStore implements FastifyRateLimitStore {
    private readonly keys = new Map<string, KeyState>();

    /** `null`: the keys name their route themselves (`http/installation-limit.ts`). */
    constructor(private readonly scope: string | null = '') {}

    private stored(key: string): string {
      return this.scope === null ? key : `${this.scope}|${key}`;
    }

    incr(key: string, callback: Callback, timeWindow: number, max: number): void {
      const now = performance.now();
      const state = this.stateOf(key, now);
      const known = state.known !== null && state.known.until > now ? state.known : null;
      if (known && known.current + state.inFlight >= max) {
        // Never more than the window Postgres last answered: `until - now` may round past it.
        const ttl = Math.min(known.ttl, Math.max(1, Math.ceil(known.until - now)));
        callback(null, { current: known.current + state.inFlight + 1, ttl });
        return;
      }
      if (!known && state.inFlight >= max) {
        state.held.push(() => this.incr(key, callback, timeWindow, max));
        return;
      }
      state.inFlight++;
      const settle = () => {
        state.inFlight--;
        const held = state.held.splice(0);
        for (const retry of held) retry();
      };
      counters.hit(this.stored(key), timeWindow).then(
        (count) => {
          const until = performance.now() + count.ttl;
          // Answers may arrive out of order: keep the highest count of the newest window.
          if (!state.known || state.known.until < until - 1 || count.current > state.known.current) {
            state.known = { current: count.current, until, ttl: count.ttl };
          }
          settle();
          callback(null, count);
        },
        (error: unknown) => {
          settle();
          callback(error instanceof Error ? error : new Error(String(error)));
        },
      );
    }

    read(key: string, callback: Callback): void {
      counters.read(this.stored(key)).then(
        (count) => callback(null, count),
        (error: unknown) => callback(error instanceof Error ? error : new Error(String(error))),
      );
    }

    private stateOf(key: string, now: number): KeyState {
      let state = this.keys.get(key);
      if (state) return state;
      // Bounded: when many keys are known at once, forget the idle ones whose window has ended
      // (or every idle one). A forgotten key only costs its next hit a trip to Postgres.
      if (this.keys.size >= MAX_REMEMBERED) {
        for (const [k, s] of this.keys) if (s.inFlight === 0 && (s.known === null || s.known.until <= now)) this.keys.delete(k);
        if (this.keys.size >= MAX_REMEMBERED) for (const [k, s] of this.keys) if (s.inFlight === 0) this.keys.delete(k);
      }
      state = { inFlight: 0, known: null, held: [] };
      this.keys.set(key, state);
      return state;
    }

    // The plugin passes the route's merged limit settings, the route itself under `routeInfo`; a
    // limit made with `app.rateLimit()` has no route there, and its keys name the route.
    child(routeOptions: Parameters<FastifyRateLimitStore['child']>[0]): FastifyRateLimitStore {
      const info = (routeOptions as { routeInfo?: { method?: string | string[]; url?: string } }).routeInfo ?? {};
      if (info.url === undefined) return new SharedStore(null);
      const method = Array.isArray(info.method) ? info.method.join(',') : (info.method ?? '');
      return new SharedStore(`${method} ${info.url ?? ''}`);
    }
  }
  return SharedStore as unknown as FastifyRateLimitStoreCtor;
}
