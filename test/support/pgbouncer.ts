import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { chmod, chown, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from '../../src/db/embedded.js';

/**
 * Debian's PgBouncer (`apt-get install pgbouncer`), in front of a Postgres server, for the
 * `system` project's tests only (`*.system.test.ts`): the broker's database reached the way many
 * operators reach theirs, through a pooler in transaction mode. Never skipped: without the package
 * those tests fail and say how to get it.
 */
export interface PgBouncer {
  /** The port the bouncer listens on (loopback), the same after `kill()` and `start()`. */
  readonly port: number;
  /**
   * The upstream URL's user and password, through the bouncer: to `database` when given (any name
   * is routed to the upstream server), to the upstream URL's own database otherwise.
   */
  url(database?: string): string;
  /** `kill -9`: every client and server connection drops at once, and new ones are refused. */
  kill(): Promise<void>;
  /** Starts the bouncer again on the same port with the same configuration (after `kill()`). */
  start(): Promise<void>;
  /** Stops the bouncer for good and removes its folder. */
  stop(): Promise<void>;
  /** Everything the bouncer logged, across its starts: for a failing test's message. */
  log(): Promise<string>;
}

export interface PgBouncerOptions {
  /** The Postgres server's URL, with the user and password the bouncer logs in with. */
  upstream: string;
  /** `transaction` (a server connection per transaction) by default; `session` keeps one per client. */
  poolMode?: 'transaction' | 'session';
  /** `default_pool_size`: how many server connections each database and user pair may have. */
  poolSize: number;
  /** `max_client_conn`: how many clients the bouncer accepts in all; 1,000 by default. */
  maxClientConn?: number;
  /**
   * More `[pgbouncer]` settings, or other values for those set here: `ignore_startup_parameters`
   * for instance, which is left unset so that the bouncer refuses what an operator's would.
   */
  extra?: Record<string, string>;
}

function pgbouncerBinary(): string {
  const found = ['/usr/sbin/pgbouncer', '/usr/bin/pgbouncer', '/usr/local/bin/pgbouncer'].find((candidate) => existsSync(candidate));
  if (!found) throw new Error("pgbouncer is not installed: `apt-get install pgbouncer` (Debian's package)");
  return found;
}

/**
 * PgBouncer refuses to run as root, so as root it runs as `postgres`, the user Debian's
 * postgresql-common creates (pgbouncer depends on it); as anyone else, as that same user.
 */
function unprivilegedUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const entry = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .map((line) => line.split(':'))
    .find((fields) => fields[0] === 'postgres');
  if (!entry) throw new Error('pgbouncer refuses to run as root, and there is no `postgres` user: `apt-get install pgbouncer`');
  return { uid: Number(entry[2]), gid: Number(entry[3]) };
}

/** A value of PgBouncer's user list: in double quotes, a quote in it doubled. */
function quoted(value: string): string {
  return `"${value.replaceAll('"', '""')}"`;
}

function renderConfig(dir: string, port: number, upstream: URL, options: PgBouncerOptions): string {
  // Brackets are URL syntax for an IPv6 address, not part of the host PgBouncer connects to.
  const host = upstream.hostname.replace(/^\[(.*)\]$/, '$1');
  const settings: Record<string, string> = {
    listen_addr: '127.0.0.1',
    listen_port: String(port),
    // No Unix socket: the default one lands in the shared /tmp, and without it a port that
    // cannot be bound is fatal rather than a warning the bouncer carries on after.
    unix_socket_dir: '',
    // The client proves its password to the bouncer with SCRAM, and the bouncer logs in to the
    // server with the same password from the user list, through the server's own SCRAM.
    auth_type: 'scram-sha-256',
    auth_file: path.join(dir, 'userlist.txt'),
    logfile: path.join(dir, 'pgbouncer.log'),
    pidfile: path.join(dir, 'pgbouncer.pid'),
    pool_mode: options.poolMode ?? 'transaction',
    default_pool_size: String(options.poolSize),
    max_client_conn: String(options.maxClientConn ?? 1000),
    // Fifteen seconds by default, during which every new client is refused at once: a test that
    // brings the server back wants the bouncer to see it back within a second.
    server_login_retry: '1',
    // Two minutes by default: a client queued that long behind a full pool is a leak the test
    // should hear of well before its own timeout.
    query_wait_timeout: '10',
    ...options.extra,
  };
  const lines = Object.entries(settings).map(([key, value]) => `${key} = ${value}`);
  return `[databases]
* = host=${host} port=${upstream.port || '5432'}

[pgbouncer]
${lines.join('\n')}
`;
}

/** Whether something accepts TCP connections on the loopback port now. */
function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

function running(child: ChildProcess | undefined): boolean {
  return child !== undefined && child.exitCode === null && child.signalCode === null;
}

/** PgBouncer in the foreground in front of `options.upstream`, once it accepts connections. */
export async function startPgBouncer(options: PgBouncerOptions): Promise<PgBouncer> {
  // Before the folder: a missing package fails with its own message, and leaves nothing behind.
  const binary = pgbouncerBinary();
  const user = unprivilegedUser();
  const upstream = new URL(options.upstream);
  const username = decodeURIComponent(upstream.username);
  const password = decodeURIComponent(upstream.password);
  // libpq's rule, which postgres.js follows: no database named means the user's own.
  const defaultDatabase = decodeURIComponent(upstream.pathname.slice(1)) || username;

  const dir = await mkdtemp(path.join(tmpdir(), 'omb-pgbouncer-'));
  // The user list holds the password in the clear: the folder is the bouncer's user's alone.
  await chmod(dir, 0o700);
  await writeFile(path.join(dir, 'userlist.txt'), `${quoted(username)} ${quoted(password)}\n`, { mode: 0o600 });
  const configFile = path.join(dir, 'pgbouncer.ini');
  const pidFile = path.join(dir, 'pgbouncer.pid');
  const logFile = path.join(dir, 'pgbouncer.log');

  let port = 0;
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  // What the bouncer wrote to stderr: everything, in the foreground, and alone in saying why it
  // stopped when it did before opening its log file (a setting it does not know, for one).
  let stderr = '';

  const writeConfig = async () => {
    await writeFile(configFile, renderConfig(dir, port, upstream, options), { mode: 0o600 });
    if (user) {
      for (const file of [dir, configFile, path.join(dir, 'userlist.txt')]) await chown(file, user.uid, user.gid);
    }
  };

  const log = async () => (await readFile(logFile, 'utf8').catch(() => '')) || stderr;

  /** Runs the bouncer and waits for its port; rejects with what it said if it stops first. */
  const run = async (): Promise<void> => {
    // A bouncer killed leaves its pid file, and the next one refuses to start if that pid has
    // since been given to some other live process.
    await rm(pidFile, { force: true });
    stderr = '';
    const started = spawn(binary, [configFile], { stdio: ['ignore', 'ignore', 'pipe'], ...user });
    child = started;
    started.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    exited = new Promise((resolve) => started.once('exit', () => resolve()));
    const deadline = Date.now() + 15_000;
    for (;;) {
      if (!running(started)) {
        await exited;
        throw new Error(`pgbouncer exited at start (${started.exitCode ?? started.signalCode}):\n${stderr}`);
      }
      if (await accepts(port)) return;
      if (Date.now() > deadline) {
        started.kill('SIGKILL');
        await exited;
        throw new Error(`pgbouncer did not listen on 127.0.0.1:${port}:\n${stderr}`);
      }
      await sleep(50);
    }
  };

  const kill = async () => {
    if (running(child)) child?.kill('SIGKILL');
    await exited;
  };

  // A port found free may be taken by someone else before the bouncer binds it: another is tried.
  // Afterwards the port is kept, since a restarted bouncer is found where it was.
  for (let attempt = 1; ; attempt++) {
    port = await freePort();
    await writeConfig();
    try {
      await run();
      break;
    } catch (error) {
      if (attempt < 3 && /cannot listen on .*Address already in use/.test(stderr)) continue;
      await rm(dir, { recursive: true, force: true });
      throw error;
    }
  }

  return {
    get port() {
      return port;
    },
    url(database = defaultDatabase) {
      const url = new URL(options.upstream);
      url.hostname = '127.0.0.1';
      url.port = String(port);
      url.pathname = `/${encodeURIComponent(database)}`;
      // The upstream's parameters (sslmode, say) are about the server; the bouncer has no TLS.
      url.search = '';
      return url.toString();
    },
    kill,
    async start() {
      if (running(child)) throw new Error('pgbouncer is already running');
      await run();
    },
    async stop() {
      // SIGTERM is PgBouncer 1.18's immediate shutdown; SIGINT would wait for every client to leave.
      if (running(child)) child?.kill('SIGTERM');
      await Promise.race([exited, sleep(5_000)]);
      await kill();
      await rm(dir, { recursive: true, force: true });
    },
    log,
  };
}
