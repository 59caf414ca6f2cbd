import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { drizzle, type PostgresJsDatabase } from 'drizzle-orm/postgres-js';
import { migrate } from 'drizzle-orm/postgres-js/migrator';
import type { Logger } from 'pino';
import postgres from 'postgres';
import * as schema from './schema.js';

export type Sql = postgres.Sql;
export type Db = PostgresJsDatabase<typeof schema> & { $client: Sql };
/** The database or a transaction on it: a store's write may be one step of a larger transaction. */
export type DbOrTransaction = Db | Parameters<Parameters<Db['transaction']>[0]>[0];

export interface Database {
  /** postgres.js, for the few statements drizzle cannot say well (queue appends, LISTEN). */
  readonly sql: Sql;
  readonly db: Db;
  readonly url: string;
  close(): Promise<void>;
}

export const MIGRATIONS_FOLDER = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../migrations');

/**
 * Seconds before the n-th reconnect attempt. postgres.js counts failed attempts across the whole
 * pool and by default waits up to 20 s, so after an outage under load the broker would stay
 * away from a Postgres that is long back; capped at 2 s it returns within a couple of seconds.
 */
export const reconnectBackoff = (attempts: number): number => Math.min(0.05 * 2 ** attempts, 2);

/** Any fixed number: the lock that lets one process at a time apply migrations. */
const MIGRATION_LOCK = 7_262_011_001;

export function openDatabase(options: { url: string; poolSize: number; logger: Logger }): Database {
  const log = options.logger.child({ component: 'database' });
  const sql = postgres(options.url, {
    max: options.poolSize,
    idle_timeout: 60,
    connect_timeout: 10,
    backoff: reconnectBackoff,
    onnotice: () => {},
    connection: { application_name: 'omb-broker' },
  });
  const db = drizzle(sql, { schema });
  let closed: Promise<void> | undefined;
  return {
    sql,
    db,
    url: options.url,
    close() {
      closed ??= sql.end({ timeout: 5 }).then(() => log.debug('database pool closed'));
      return closed;
    },
  };
}

/**
 * Applies the SQL migrations in `migrations/`. Safe when several brokers start at once: the
 * first takes an advisory lock on its own connection, the others wait and then find nothing to do.
 */
export async function applyMigrations(url: string, logger: Logger): Promise<void> {
  const sql = postgres(url, { max: 1, onnotice: () => {}, connect_timeout: 10 });
  const startedAt = Date.now();
  try {
    await sql`select pg_advisory_lock(${MIGRATION_LOCK})`;
    await migrate(drizzle(sql), { migrationsFolder: MIGRATIONS_FOLDER });
    await sql`select pg_advisory_unlock(${MIGRATION_LOCK})`;
  } finally {
    await sql.end({ timeout: 5 });
  }
  logger.info({ component: 'database', ms: Date.now() - startedAt }, 'migrations applied');
}
