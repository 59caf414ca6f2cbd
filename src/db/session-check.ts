import { randomBytes } from 'node:crypto';
import postgres from 'postgres';

/**
 * How long a notification to ourselves may take before the URL is taken for one that keeps no
 * session. Postgres delivers one in milliseconds; through a transaction pooler it never comes.
 */
const HEARD_WITHIN_MS = 5_000;

/**
 * The URL does not keep a session between statements: a transaction pooler (PgBouncer's
 * `pool_mode = transaction`, most managed poolers) is in front of Postgres. Through one, a `LISTEN`
 * is never heard and a session lock or setting lands on whichever server connection ran it. Not a
 * crash: started again as it is, the broker would refuse again (main.ts exits 78).
 */
export class SessionNotKept extends Error {
  override name = 'SessionNotKept';
}

/**
 * Refuses `url` (throws `SessionNotKept`, naming `setting`) unless a connection to it keeps its
 * session: a `LISTEN` on one connection must hear a notification sent from another. Through a
 * transaction pooler the listening client is handed no server connection once its `LISTEN` is
 * done, so it hears nothing, whichever server runs the notification.
 */
export async function checkSessionKept(url: string, setting: string, options: { heardWithinMs?: number } = {}): Promise<void> {
  const channel = `omb_session_check_${randomBytes(8).toString('hex')}`;
  let heard!: () => void;
  const hearing = new Promise<void>((resolve) => (heard = resolve));
  const connect = { max: 1, onnotice: () => {}, connect_timeout: 10, prepare: false } as const;
  const listening = postgres(url, { ...connect, ...({ onnotify: (name: string) => name === channel && heard() } as object) });
  const sending = postgres(url, connect);
  let timer: NodeJS.Timeout | undefined;
  try {
    await listening.unsafe(`listen "${channel}"`);
    await sending`select pg_notify(${channel}, '')`;
    const withinMs = options.heardWithinMs ?? HEARD_WITHIN_MS;
    const quiet = new Promise<false>((resolve) => (timer = setTimeout(resolve, withinMs, false)));
    if ((await Promise.race([hearing.then(() => true), quiet])) === false) {
      throw new SessionNotKept(
        `${setting} does not keep a session: a LISTEN on it did not hear a notification within ${withinMs} ms, as through a transaction pooler (PgBouncer's pool_mode = transaction). ${
          setting === 'DATABASE_URL'
            ? 'Set DATABASE_DIRECT_URL to Postgres itself (for LISTEN, session locks and the migrations) and keep the pooler in DATABASE_URL'
            : 'Give Postgres itself (or a session-mode pooler) there'
        }; see docs/operating.md, "Behind a pooler"`,
      );
    }
  } finally {
    clearTimeout(timer);
    await Promise.all([listening.end({ timeout: 1 }), sending.end({ timeout: 1 })]);
  }
}

/**
 * A pooler's answer to a startup parameter it does not pass on (PgBouncer's `08P01` for
 * `statement_timeout`, which the broker sends Postgres itself unless `DATABASE_DIRECT_URL` is set).
 */
export function refusedStartupParameter(error: unknown): boolean {
  return error instanceof postgres.PostgresError && error.code === '08P01' && /unsupported startup parameter/i.test(error.message);
}
