import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { drizzle } from 'drizzle-orm/postgres-js';
import { migrate } from 'drizzle-orm/postgres-js/migrator';
import type { Logger } from 'pino';
import postgres from 'postgres';
import { applyFunctionFiles } from './functions.js';

export const MIGRATIONS_FOLDER = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../migrations');
/** The one definition of each database function, a file per function (see db/functions.ts). */
export const FUNCTIONS_FOLDER = path.join(MIGRATIONS_FOLDER, 'functions');

/** Any fixed number: the lock that lets one process at a time apply migrations. */
const MIGRATION_LOCK = 7_262_011_001;

/**
 * Applies the SQL migrations in `migrations/`, then the function files in `migrations/functions/`
 * that changed since they were last applied. Safe when several brokers start at once: the first
 * takes an advisory lock on its own connection, the others wait and then find nothing to do.
 */
export async function applyMigrations(url: string, logger: Logger): Promise<void> {
  const sql = postgres(url, { max: 1, onnotice: () => {}, connect_timeout: 10 });
  const startedAt = Date.now();
  let functions: string[];
  try {
    await sql`select pg_advisory_lock(${MIGRATION_LOCK})`;
    await migrate(drizzle(sql), { migrationsFolder: MIGRATIONS_FOLDER });
    functions = await applyFunctionFiles(sql, FUNCTIONS_FOLDER);
    await sql`select pg_advisory_unlock(${MIGRATION_LOCK})`;
  } finally {
    await sql.end({ timeout: 5 });
  }
  logger.info(
    { component: 'database', ms: Date.now() - startedAt, functionFilesApplied: functions.length, functions },
    'migrations applied',
  );
}
