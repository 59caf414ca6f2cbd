import { connect, type Socket } from 'node:net';
import { drizzle, type PostgresJsDatabase } from 'drizzle-orm/postgres-js';
import type { Logger } from 'pino';
import type postgres from 'postgres';
import { RELEASE } from '../release.js';
import { openBoundedPool } from './bounded-pool.js';
import * as schema from './schema.js';

export type Sql = postgres.Sql;
export type Db = PostgresJsDatabase<typeof schema> & { $client: Sql };
/** The database or a transaction on it: a store's write may be one step of a larger transaction. */
export type DbOrTransaction = Db | Parameters<Parameters<Db['transaction']>[0]>[0];

export interface Database {
  /**
   * postgres.js itself (drizzle's `db.$client` is the same pool), for what drizzle's query builder
   * cannot say: calling the database functions (ingest, the queue's reads), LISTEN/NOTIFY,
   * advisory locks on a reserved connection, partition DDL, and statements the builder has no
   * words for (lateral reads, data-modifying CTEs, batched deletes). Which when: src/README.md.
   */
  readonly sql: Sql;
  readonly db: Db;
  readonly url: string;
  /**
   * Where what needs a session goes (`LISTEN`, a session advisory lock, the migrations): Postgres
   * itself. `DATABASE_DIRECT_URL` when `url` is a transaction pooler, `url` otherwise.
   */
  readonly sessionUrl: string;
  /**
   * At most two connections to `sessionUrl`, for a session advisory lock held on a reserved
   * connection (`sessions.reserve()`) while a job runs; opened when first used, closed when idle.
   */
  readonly sessions: Sql;
  /**
   * Resolves when Postgres answers a `select 1` within about a second (`HEALTH_TIMEOUT_MS`, or
   * the database timeout if shorter), on a connection of its own: it never waits behind a busy
   * or reconnecting pool. Rejects otherwise. Calls made while one is under way share its answer,
   * and an answer stands for half a second (`PING_FRESH_MS`); a failure is never remembered.
   */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Seconds before the n-th reconnect attempt. postgres.js counts failed attempts across the whole
 * pool and by default waits up to 20 s, so after an outage under load the broker would stay
 * away from a Postgres that is long back; capped at 2 s it returns within a couple of seconds.
 */
export const reconnectBackoff = (attempts: number): number => Math.min(0.05 * 2 ** attempts, 2);

/** `DATABASE_TIMEOUT_MS` when not given (config.ts takes it as the setting's default). */
export const DEFAULT_DATABASE_TIMEOUT_MS = 10_000;
/** Past the statement timeout, how long an answer may still take before the connection is cut. */
const ANSWER_MARGIN_MS = 1_000;
/**
 * A ping answered this recently stands for the next ones: balancers and monitors probe `/health`
 * often, from every process, and a probe should cost no more than a request does. A failure is
 * never remembered.
 */
export const PING_FRESH_MS = 500;

/** The bound on `ping` (the `/health` probe). */
const HEALTH_TIMEOUT_MS = 1_000;

export interface DatabaseOptions {
  url: string;
  /**
   * Postgres itself, when `url` is a transaction pooler (`DATABASE_DIRECT_URL`). Through the pooler
   * then: no named prepared statement (a server connection other than the one that prepared it
   * may run the next), and no startup parameter but `application_name` (PgBouncer refuses
   * `statement_timeout`), so every statement is bounded from here, by a cancel request.
   */
  directUrl?: string;
  poolSize: number;
  logger: Logger;
  /**
   * Bound on every use of the pool from being asked to being done: waiting for a free
   * connection, for Postgres to come back, and the statement itself (see bounded-pool.ts; a
   * transaction is bounded until its callback starts, then each statement by Postgres's
   * `statement_timeout`, which is this too). Also bounds connecting and, on plain TCP
   * connections, waiting for any answer at all. Past it the use fails (answered `503`), whether
   * Postgres is frozen, refusing, or the pool is full, instead of holding the request.
   */
  timeoutMs?: number;
}

/**
 * What this release's connections call themselves (`application_name`, seen in
 * `pg_stat_activity`): the pool's, the health probe's and the LISTEN connection's, each naming the
 * release, so that a broker can tell another release's connections from its own.
 */
export const APPLICATION_NAMES = {
  pool: `omb-broker/${RELEASE}`,
  health: `omb-broker-health/${RELEASE}`,
  listen: `omb-broker-listen/${RELEASE}`,
  sessions: `omb-broker-sessions/${RELEASE}`,
} as const;

/**
 * The session connections a process may open beside its `LISTEN` one: one per repair job holding
 * its lock (docs/operating.md, "Behind a pooler", counts them).
 */
const SESSION_POOL_SIZE = 2;

/** The names the previous release (0.1.0) gave its connections, without its release. */
export const PREVIOUS_RELEASE_APPLICATION_NAMES = ['omb-broker', 'omb-broker-health', 'omb-broker-listen'] as const;

export function openDatabase(options: DatabaseOptions): Database {
  const log = options.logger.child({ component: 'database' });
  const timeoutMs = options.timeoutMs ?? DEFAULT_DATABASE_TIMEOUT_MS;
  const pooled = options.directUrl !== undefined;
  const pool = openBoundedPool(options.url, {
    size: options.poolSize,
    timeoutMs,
    boundStatements: pooled,
    client: clientOptions(APPLICATION_NAMES.pool, timeoutMs, pooled),
  });
  const healthMs = Math.min(HEALTH_TIMEOUT_MS, timeoutMs);
  const health = openBoundedPool(options.url, {
    size: 1,
    timeoutMs: healthMs,
    boundStatements: pooled,
    client: clientOptions(APPLICATION_NAMES.health, healthMs, pooled),
  });
  const sessionUrl = options.directUrl ?? options.url;
  const sessions = openBoundedPool(sessionUrl, {
    size: SESSION_POOL_SIZE,
    timeoutMs,
    client: clientOptions(APPLICATION_NAMES.sessions, timeoutMs, false),
  });
  const sql = pool.sql;
  const db = drizzle(sql, { schema });
  let pinging: Promise<void> | undefined;
  /** When Postgres last answered a ping (`performance.now()`). */
  let answeredAt = Number.NEGATIVE_INFINITY;
  let closed: Promise<void> | undefined;
  return {
    sql,
    db,
    url: options.url,
    sessionUrl,
    sessions: sessions.sql,
    ping() {
      if (performance.now() - answeredAt < PING_FRESH_MS) return Promise.resolve();
      pinging ??= health.sql`select 1`.then(
        () => {
          pinging = undefined;
          answeredAt = performance.now();
        },
        (error: unknown) => {
          pinging = undefined;
          throw error;
        },
      );
      return pinging;
    },
    close() {
      closed ??= Promise.all([pool.end({ timeout: 5 }), health.end({ timeout: 1 }), sessions.end({ timeout: 5 })]).then(() =>
        log.debug('database pool closed'),
      );
      return closed;
    },
  };
}

/**
 * Each of the pool's connections (and the health probe's), bounded by `timeoutMs`: by Postgres's
 * `statement_timeout` on a connection to Postgres itself; `pooled` (through a transaction pooler),
 * by the pool alone (bounded-pool.ts `boundStatements`), with unnamed statements only.
 */
function clientOptions(
  applicationName: string,
  timeoutMs: number,
  pooled: boolean,
): postgres.Options<Record<string, postgres.PostgresType>> {
  return {
    idle_timeout: 60,
    connect_timeout: Math.max(1, Math.ceil(timeoutMs / 1000)),
    backoff: reconnectBackoff,
    onnotice: () => {},
    prepare: !pooled,
    connection: pooled ? { application_name: applicationName } : { application_name: applicationName, statement_timeout: timeoutMs },
    // postgres.js takes a socket factory (documented, though missing from its types).
    ...({ socket: answerBoundSocket(timeoutMs + ANSWER_MARGIN_MS) } as object),
  };
}

/** What postgres.js passes a custom socket factory. */
interface SocketTarget {
  host: string[];
  port: number[];
  path?: string | false;
}

/**
 * Sockets to Postgres that give up on an answer that does not come. Postgres's own
 * `statement_timeout` bounds a slow statement, but a Postgres that is frozen (stopped, its
 * machine hung, a network path that drops packets silently) answers nothing, not even the
 * timeout: the kernel keeps accepting what is sent. So once something has been sent, the socket
 * waits at most `answerMs` for any byte back, then is destroyed with `ETIMEDOUT`; postgres.js
 * fails the queries on it (which the HTTP layer answers with `503`) and reconnects.
 *
 * Idle connections (nothing sent) are never cut, so a `LISTEN` connection waits for
 * notifications as long as it likes. Limits: the watch sees the bytes of a plain TCP
 * connection; on TLS (the handle is wrapped below JavaScript) only the statement and connect
 * timeouts apply. An answer that stops halfway after its first bytes arrived is not bounded.
 */
function answerBoundSocket(answerMs: number): (target: SocketTarget) => Socket {
  let attempt = 0;
  return (target) => {
    const index = attempt++ % Math.max(1, target.host.length);
    const host = target.host[index] ?? 'localhost';
    const port = target.port[index] ?? target.port[0] ?? 5432;
    // Handed over while still connecting, as postgres.js's own sockets are: what it writes first
    // waits for the connection, and a refused or failed connection reaches postgres.js as the
    // socket's `error` and `close`, so its reconnecting and its connect timeout work unchanged.
    const socket = target.path ? connect(target.path) : connect(port, host);
    Object.assign(socket, { host, port });
    return boundAnswers(socket, answerMs);
  };
}

function boundAnswers(socket: Socket, answerMs: number): Socket {
  let waiting: NodeJS.Timeout | undefined;
  const write = socket.write.bind(socket) as (...args: unknown[]) => boolean;
  socket.write = ((...args: unknown[]) => {
    waiting ??= setTimeout(() => socket.destroy(timedOut(`Postgres did not answer within ${answerMs} ms`, 'ETIMEDOUT')), answerMs);
    return write(...args);
  }) as Socket['write'];
  socket.on('data', () => {
    clearTimeout(waiting);
    waiting = undefined;
  });
  socket.once('close', () => clearTimeout(waiting));
  return socket;
}

function timedOut(message: string, code: string): Error {
  return Object.assign(new Error(message), { code });
}
