import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * Who the Composio calls made in this async context are for, and when the request that makes
 * them must be done with Composio. Set once per request (by the app, for a caller's
 * installation); every call the request makes, however deep, reads it here, so the services in
 * between need not carry it.
 */
export interface CallerScope {
  /** The fair queue's flow: calls of one flow queue behind each other, not behind other flows. */
  readonly flow: string;
  /** `performance.now()` instant by which every Composio call of the request must be answered. */
  readonly deadlineAt: number;
}

const storage = new AsyncLocalStorage<CallerScope>();

/** Runs `fn` (and everything it starts) as `scope`'s calls. */
export function runAsCaller<T>(scope: CallerScope, fn: () => T): T {
  return storage.run(scope, fn);
}

export function currentCaller(): CallerScope | undefined {
  return storage.getStore();
}
