import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../../config.js';
import { applyMigrations, type Database, openDatabase } from '../../db/database.js';
import { startEmbeddedPostgres } from '../../db/embedded.js';
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
 * Runs `work` against the broker's database, migrated first: `DATABASE_URL`, or the embedded
 * Postgres in `DATA_DIR`, started for the command and stopped after it.
 */
export async function withBrokerDatabase<T>(config: Config, logger: Logger, work: (database: Database) => Promise<T>): Promise<T> {
  let url = config.databaseUrl;
  let stopEmbedded: (() => Promise<void>) | undefined;
  if (!url) {
    refuseWhileInUse(config.dataDir);
    const embedded = await startEmbeddedPostgres({ dataDir: config.dataDir, logger });
    stopEmbedded = () => embedded.stop();
    url = embedded.url;
  }
  let database: Database | undefined;
  try {
    await applyMigrations(url, logger);
    // postgres.js connects on first use, so a command that only migrates opens no connection.
    database = openDatabase({ url, poolSize: 2, logger });
    return await work(database);
  } finally {
    await database?.close();
    await stopEmbedded?.();
  }
}

/**
 * Starting the embedded server stops one that still runs in the folder (the broker treats that as
 * left over from a crash), which would pull the database from under a running broker.
 */
function refuseWhileInUse(dataDir: string): void {
  const pidFile = path.resolve(dataDir, 'postgres', 'postmaster.pid');
  if (!existsSync(pidFile)) return;
  const pid = Number.parseInt(readFileSync(pidFile, 'utf8').split('\n')[0] ?? '', 10);
  if (!Number.isInteger(pid) || pid <= 0) return;
  try {
    process.kill(pid, 0);
  } catch {
    return;
  }
  throw new CommandFailed(
    `the embedded Postgres in ${path.resolve(dataDir)} is running (pid ${pid}), probably under a broker; stop the broker first or set DATABASE_URL`,
  );
}
