import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { drizzle } from 'drizzle-orm/postgres-js';
import { migrate } from 'drizzle-orm/postgres-js/migrator';
import type { Logger } from 'pino';
import postgres from 'postgres';
import { PACKAGE_ROOT } from '../package-root.js';
import { RELEASE } from '../release.js';
import { applyFunctionFiles, FunctionFileError } from './functions.js';
import { checkSessionKept } from './session-check.js';

export const MIGRATIONS_FOLDER = path.join(PACKAGE_ROOT, 'migrations');
/** The one definition of each database function, a file per function (see db/functions.ts). */
export const FUNCTIONS_FOLDER = path.join(MIGRATIONS_FOLDER, 'functions');

/** Any fixed number: the lock that lets one process at a time apply migrations. */
const MIGRATION_LOCK = 7_262_011_001;

/**
 * How long one of a migration's statements waits for a table lock before it gives up. A statement
 * waiting for a lock on a table queues every later statement on that table behind it (the
 * serving brokers' ingest and reads), so the wait must be a moment, then retried, never minutes.
 */
const LOCK_TIMEOUT_MS = 2000;
/** How long the migrations keep retrying a lock they did not get before the broker gives up. */
const RETRY_FOR_MS = 120_000;
/** The pause after the first attempt that waited too long; it doubles after each, up to the last. */
const FIRST_PAUSE_MS = 250;
const LONGEST_PAUSE_MS = 8000;

/** Postgres's codes for a lock not had: `lock_not_available` (lock_timeout) and `deadlock_detected`. */
const LOCK_FAILURES: Record<string, string> = {
  '55P03': 'waited longer than lock_timeout for a lock another session held',
  '40P01': 'was chosen by Postgres to end a deadlock with another session',
};

/** The migrations could not be applied; the message, one line, says which and why (main.ts prints it). */
export class MigrationError extends Error {
  override name = 'MigrationError';
}

export interface MigrationOptions {
  /** The versioned migrations; `migrations/` by default. */
  readonly migrationsFolder?: string;
  /** The function files; `<migrationsFolder>/functions` by default. */
  readonly functionsFolder?: string;
  readonly lockTimeoutMs?: number;
  /** How long to keep retrying a lock not had; RETRY_FOR_MS by default. */
  readonly retryForMs?: number;
  /** The release applying them (package.json's version by default), see db/functions.ts. */
  readonly release?: string;
  /** The setting `url` came from, for the refusal of one that keeps no session (`DATABASE_URL` by default). */
  readonly setting?: string;
  /** `url` is Postgres itself (the embedded server): no pooler to look for. */
  readonly direct?: boolean;
}

/**
 * Applies the SQL migrations in `migrations/`, then the function files in `migrations/functions/`
 * that changed since they were last applied, on a connection that must keep its session (a
 * transaction pooler is refused, `SessionNotKept`: give Postgres itself, `DATABASE_DIRECT_URL`).
 * Safe when several brokers start at once: the first takes an advisory lock on its own
 * connection, the others wait and then find nothing to do.
 *
 * Safe beside serving brokers too: every statement waits at most `lock_timeout` for a lock (a
 * migration rolled out while another release serves once deadlocked with live ingest), and a step
 * that did not get its lock is rolled back and tried again after a pause, for up to RETRY_FOR_MS;
 * past that it throws a MigrationError naming the migration or function file. drizzle's `migrate`
 * (drizzle-orm/pg-core/dialect.js) runs every pending migration in one transaction, each after the
 * last one recorded, so a failure leaves none of them applied, half or whole; the function files
 * are applied in a transaction of their own (db/functions.ts).
 */
export async function applyMigrations(url: string, logger: Logger, options: MigrationOptions = {}): Promise<void> {
  const migrationsFolder = options.migrationsFolder ?? MIGRATIONS_FOLDER;
  const functionsFolder = options.functionsFolder ?? path.join(migrationsFolder, 'functions');
  const retry: RetrySettings = {
    lockTimeoutMs: options.lockTimeoutMs ?? LOCK_TIMEOUT_MS,
    retryForMs: options.retryForMs ?? RETRY_FOR_MS,
    logger,
  };
  const release = options.release ?? RELEASE;
  // The lock below, and the setting after it, belong to the connection's session.
  if (!options.direct) await checkSessionKept(url, options.setting ?? 'DATABASE_URL');
  const sql = postgres(url, { max: 1, onnotice: () => {}, connect_timeout: 10 });
  const startedAt = Date.now();
  let functions: string[];
  try {
    await sql`select pg_advisory_lock(${MIGRATION_LOCK})`;
    // Only after the advisory lock, which waits for another broker's migrations however long they take.
    await sql`select set_config('lock_timeout', ${`${retry.lockTimeoutMs}ms`}, false)`;
    await withLockRetries(
      () => migrate(drizzle(sql), { migrationsFolder }),
      (error) => failedMigration(sql, migrationsFolder, error),
      'none of the pending migrations was applied',
      retry,
    );
    functions = await withLockRetries(
      () => applyFunctionFiles(sql, functionsFolder, { release, logger }),
      async (error) => {
        const file = causes(error).find((e): e is FunctionFileError => e instanceof FunctionFileError)?.file;
        return file ? `function file ${path.basename(file)}` : 'the function files';
      },
      'no function file was applied',
      retry,
    );
    await sql`select pg_advisory_unlock(${MIGRATION_LOCK})`;
  } finally {
    await sql.end({ timeout: 5 });
  }
  logger.info(
    { component: 'database', ms: Date.now() - startedAt, release, functionFilesApplied: functions.length, functions },
    'migrations applied',
  );
}

interface RetrySettings {
  readonly lockTimeoutMs: number;
  readonly retryForMs: number;
  readonly logger: Logger;
}

/**
 * Runs `step` (one transaction) again while it fails for a lock it did not get, with a pause that
 * doubles each time, jittered so that brokers started together do not retry in step.
 */
async function withLockRetries<T>(
  step: () => Promise<T>,
  name: (error: unknown) => Promise<string>,
  leftAsItWas: string,
  { lockTimeoutMs, retryForMs, logger }: RetrySettings,
): Promise<T> {
  const startedAt = Date.now();
  for (let attempt = 1; ; attempt++) {
    try {
      return await step();
    } catch (error) {
      const failure = causes(error).find((e): e is postgres.PostgresError => typeof e.code === 'string' && e.code in LOCK_FAILURES);
      if (!failure) throw error;
      const what = await name(error);
      const waited = `${LOCK_FAILURES[failure.code]} (lock_timeout ${lockTimeoutMs} ms)`;
      const statement = shortStatement(error);
      const elapsedMs = Date.now() - startedAt;
      const ceiling = Math.min(FIRST_PAUSE_MS * 2 ** (attempt - 1), LONGEST_PAUSE_MS);
      const pauseMs = Math.round(ceiling / 2 + (Math.random() * ceiling) / 2);
      if (elapsedMs + pauseMs > retryForMs) {
        throw new MigrationError(
          `${what} gave up after ${attempt} attempts in ${Math.round(elapsedMs / 1000)} s: each ${waited}` +
            `${statement ? `, at: ${statement}` : ''}; ${leftAsItWas}. Start the broker again once the lock is free (docs/migrations.md)`,
          { cause: error },
        );
      }
      logger.warn(
        { component: 'database', step: what, attempt, code: failure.code, statement, pauseMs },
        `${what} ${waited}; rolled back, retrying`,
      );
      await sleep(pauseMs);
    }
  }
}

/** The error and its causes, outermost first (drizzle wraps Postgres's error in its own). */
function causes(error: unknown): Array<Error & { code?: unknown; query?: unknown }> {
  const found: Array<Error & { code?: unknown; query?: unknown }> = [];
  for (let e = error; e instanceof Error && found.length < 8; e = e.cause) found.push(e);
  return found;
}

/** The failed statement, on one line and short, for the log and the error. */
function shortStatement(error: unknown): string | undefined {
  const query = causes(error).find((e) => typeof e.query === 'string')?.query as string | undefined;
  if (query === undefined) return undefined;
  const line = query
    .replace(/--[^\n]*/g, ' ')
    .replace(/\s+/g, ' ')
    .trim()
    .replace(/;+$/, '');
  return line.length > 120 ? `${line.slice(0, 117)}...` : line;
}

/** The pending migration whose statement failed, by its tag (the file's name without `.sql`). */
async function failedMigration(sql: postgres.Sql, folder: string, error: unknown): Promise<string> {
  const journal = JSON.parse(await readFile(path.join(folder, 'meta', '_journal.json'), 'utf8')) as {
    entries: Array<{ tag: string; when: number }>;
  };
  const [recorded] = await sql<{ last: string | null }[]>`
    select case when to_regclass('drizzle.__drizzle_migrations') is not null
      then (select max(created_at)::text from drizzle.__drizzle_migrations) end as last`;
  const last = Number(recorded?.last ?? -1);
  const pending = journal.entries.filter((entry) => entry.when > last);
  const queries = causes(error)
    .map((e) => e.query)
    .filter((q): q is string => typeof q === 'string');
  for (const entry of pending) {
    const text = await readFile(path.join(folder, `${entry.tag}.sql`), 'utf8');
    // As drizzle splits a migration into its statements (drizzle-orm/migrator.js).
    if (text.split('--> statement-breakpoint').some((statement) => queries.includes(statement))) return `migration ${entry.tag}`;
  }
  return pending.length === 1 ? `migration ${pending[0]!.tag}` : `the migrations ${pending.map((e) => e.tag).join(', ')}`;
}
