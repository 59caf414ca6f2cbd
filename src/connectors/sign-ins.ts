import type { ConnectedAccount } from '../composio/index.js';

/**
 * Composio's hosted sign-in links expire after ten minutes ("Connection initiation did not
 * complete within 10 minutes", composio-api.md §10 row 12). What status the account then takes
 * is not documented: `EXPIRED` and `FAILED` already say it does not work, and one still
 * `INITIATED` (or `INITIALIZING`) that long after it was made can no longer be finished either.
 */
const SIGN_IN_LIFETIME_MS = 10 * 60 * 1000;

const STARTED: ReadonlySet<string> = new Set(['INITIALIZING', 'INITIATED', 'PENDING']);

/** A sign-in started and never finished, whose link has expired by `now`. */
export function isAbandonedSignIn(account: Pick<ConnectedAccount, 'status' | 'createdAt'>, now: Date): boolean {
  if (!STARTED.has(account.status)) return false;
  const started = Date.parse(account.createdAt);
  return Number.isFinite(started) && now.getTime() - started >= SIGN_IN_LIFETIME_MS;
}
