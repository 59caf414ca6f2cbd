/**
 * A rejection the database driver leaves unhandled, which is no fault of the broker's: said as a
 * warning and otherwise ignored (main.ts), where any other unhandled rejection stops the broker.
 *
 * postgres.js reads Postgres's array types on each connection it opens, before the connection's
 * first query, and does not handle that read's failure (node_modules/postgres/src/connection.js,
 * `fetchArrayTypes`, whose promise nobody awaits). A connection lost at that moment (Postgres or a
 * pooler restarting; PgBouncer giving up on a client that waited `query_wait_timeout` for a
 * server) rejects it unhandled. The query that opened the connection fails on its own, handled
 * (`503`); the connection, opened again, may skip its own read, but the pool's lanes share what
 * any of them read (src/db/bounded-pool.ts), which a broker does before it serves. Nothing is
 * lost, and stopping the broker for it would turn a database blip into an outage.
 *
 * Returns the warning to log for such a rejection, undefined for any other.
 */
export function driverFault(reason: unknown): string | undefined {
  const query = (reason as { query?: unknown } | null)?.query;
  if (!(reason instanceof Error) || typeof query !== 'string') return undefined;
  if (/\bb\.typarray\b/.test(query) && /\bpg_catalog\.pg_type\b/.test(query)) {
    return 'a database connection failed while it read Postgres’s array types; it opens again when next used';
  }
  return undefined;
}
