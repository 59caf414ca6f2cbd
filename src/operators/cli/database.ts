import { existsSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../../config.js';
import { DataDirInUseError } from '../../db/data-dir-lock.js';
import { type Database, openDatabase } from '../../db/database.js';
import { runningEmbeddedUrl, startEmbeddedPostgres } from '../../db/embedded.js';
import { applyMigrations } from '../../db/migrate.js';
import { createLogger } from '../../logger.js';
import { type CliIo, CommandFailed } from './command.js';

/**
 * The CLI prints its own one-line summaries; the broker's routine `info` lines would only repeat
 * them, so below `debug` it logs warnings only (to stderr, keeping stdout for results).
 */
export function cliLogger(config: Config, io: CliIo): Logger {
  const level = ['debug', 'trace', 'silent'].includes(config.logLevel) ? config.logLevel : 'warn';
  return createLogger(level, { write: (line: string) => io.err(line) });
}

/** Where the command works, for messages: never the URL itself, which may hold a password. */
export function describeTarget(config: Config): string {
  if (!config.databaseUrl) return `the embedded Postgres in ${path.resolve(config.dataDir)}`;
  const url = new URL(config.databaseUrl);
  return `${url.hostname}${url.port ? `:${url.port}` : ''}${url.pathname}`;
}

/**
 * Runs `work` against the broker's database, migrated first: `DATABASE_URL`, or else the
 * embedded Postgres in `DATA_DIR` — the one a broker runs there now (reached with the port and
 * password the folder holds), or, with no broker on it, one started for the command and stopped
 * after it. docs/operators.md ("Which database the CLI uses") says the same for operators.
 */
export async function withBrokerDatabase<T>(config: Config, logger: Logger, work: (database: Database) => Promise<T>): Promise<T> {
  let url = config.databaseUrl;
  let stopEmbedded: (() => Promise<void>) | undefined;
  if (!url) {
    refuseUnnamedDatabase(config);
    url = runningUrl(config.dataDir);
    if (!url) {
      const embedded = await startEmbedded(config.dataDir, logger);
      stopEmbedded = () => embedded.stop();
      url = embedded.url;
    }
  }
  let database: Database | undefined;
  try {
    const directUrl = config.databaseUrl ? config.databaseDirectUrl : undefined;
    await applyMigrations(directUrl ?? url, logger, {
      setting: directUrl ? 'DATABASE_DIRECT_URL' : 'DATABASE_URL',
      direct: !config.databaseUrl,
    });
    // postgres.js connects on first use, so a command that only migrates opens no connection.
    database = openDatabase({ url, ...(directUrl ? { directUrl } : {}), poolSize: 2, logger });
    return await work(database);
  } finally {
    await database?.close();
    await stopEmbedded?.();
  }
}

/**
 * Runs `work` with the URL of the embedded Postgres in `DATA_DIR`: the one a broker runs there now,
 * or one started for the command and stopped after it. For the commands that work on the embedded
 * server itself (`backup`): refused with `DATABASE_URL`, whose server has its own tools.
 */
export async function withEmbeddedServer<T>(config: Config, logger: Logger, what: string, work: (url: string) => Promise<T>): Promise<T> {
  if (config.databaseUrl) {
    throw new CommandFailed(
      `${what} is for the embedded Postgres (no DATABASE_URL); back up an external Postgres with its own tools (docs/operators.md, "Backups")`,
    );
  }
  refuseUnnamedDatabase(config);
  const running = runningUrl(config.dataDir);
  if (running) return work(running);
  const embedded = await startEmbedded(config.dataDir, logger);
  try {
    return await work(embedded.url);
  } finally {
    await embedded.stop();
  }
}

/**
 * Neither `DATABASE_URL` nor `DATA_DIR` names a database, and the default folder holds none: run
 * from another folder, the command would otherwise make an empty database there and answer from
 * it ("0 installation(s)") as if it were the broker's.
 */
function refuseUnnamedDatabase(config: Config): void {
  if (config.dataDirGiven) return;
  const folder = path.resolve(config.dataDir);
  if (existsSync(path.join(folder, 'postgres', 'PG_VERSION'))) return;
  throw new CommandFailed(
    `no database named: DATABASE_URL is not set, nor DATA_DIR, and the default data folder ${folder} holds no broker database; set DATABASE_URL, or DATA_DIR to the broker's data folder`,
  );
}

/** A broker's embedded Postgres running in the folder now: used as it runs, never stopped. */
function runningUrl(dataDir: string): string | undefined {
  try {
    return runningEmbeddedUrl(dataDir);
  } catch (error) {
    throw new CommandFailed((error as Error).message);
  }
}

async function startEmbedded(dataDir: string, logger: Logger) {
  try {
    return await startEmbeddedPostgres({ dataDir, logger });
  } catch (error) {
    // A broker that holds the folder but has not started its Postgres yet.
    if (error instanceof DataDirInUseError) {
      throw new CommandFailed(`${error.message.split(';')[0]}, and its Postgres is not up yet; try again in a moment`);
    }
    throw error;
  }
}
