import postgres from 'postgres';

type Sql = postgres.Sql;
type ClientOptions = postgres.Options<Record<string, postgres.PostgresType>>;

/**
 * The code of the error a database use gets when it has not finished within the database bound
 * (`DATABASE_TIMEOUT_MS`): the HTTP layer answers it `503 database_unavailable`.
 */
export const DATABASE_TIMEOUT = 'DATABASE_TIMEOUT';

class DatabaseTimeout extends Error {
  readonly code = DATABASE_TIMEOUT;
  constructor(timeoutMs: number) {
    super(`the database did not serve this within ${timeoutMs} ms`);
    this.name = 'DatabaseTimeout';
  }
}

export interface BoundedPool {
  /** Used as postgres.js is; every use through it is bounded as `openBoundedPool` says. */
  readonly sql: Sql;
  end(options?: { timeout?: number }): Promise<void>;
}

/**
 * A pool of `size` connections in which nothing waits longer than `timeoutMs` from being asked:
 * a query (`sql\`…\``, `sql.unsafe`, and so everything drizzle sends outside a transaction), the
 * start of a transaction (`sql.begin`, drizzle's `db.transaction`) and a reserved connection
 * (`sql.reserve`) that is not done by then fails with `DatabaseTimeout`, whether it waited for a
 * free connection, for Postgres to come back, or for its statement. What happens to it then:
 *
 * - still waiting for a connection: it is taken out of the line and never reaches Postgres;
 * - its statement running: Postgres is asked to stop it (a cancel request), so nothing keeps
 *   running for a caller that has been answered;
 * - a transaction whose callback has not started: the callback never runs (if a connection comes
 *   later, its `begin` is rolled back at once). A callback that started is bounded by the
 *   statement timeout on each of its statements, as before;
 * - a reservation not yet granted: the connection is handed back as soon as it comes.
 *
 * Why not postgres.js's own pool with `.cancel()`: past its free connections it pipelines a query
 * onto a busy connection (sent to Postgres at once, behind the running one, where a cancel no
 * longer stops it), and cancelling a query that waits for its connection to (re)connect leaves
 * that connection stuck unused (node_modules/postgres/src/connection.js: a cancelled `initial` is
 * never executed, and nothing moves the connection on). So each connection is a postgres.js
 * client of one connection (a lane) given one use at a time: the waiting line is ours, and a
 * query reaches its lane only when the lane has nothing else, so it either starts at once or is
 * the first query of the connection the lane (re)opens. Given up on there, it is made unsendable
 * (`unsendable`) rather than cancelled. Lanes of one connection also keep clear of the reserve
 * requests a failed connection attempt leaves behind in a many-connection pool's queue.
 *
 * Relies on postgres.js 3.4's query objects (src/query.js; the version is pinned in
 * package.json): `handler`, called once when the query is first awaited, `resolve`/`reject`,
 * `state`, `strings`/`args` and `canceller`. Not bounded: `sql.file`, `sql.largeObject` and
 * `sql.subscribe` (unused here); `sql.listen` opens a client of its own, as postgres.js does.
 * A long poll holds no connection while it waits (src/events/queue/poll.ts), so it is not cut.
 */
export function openBoundedPool(
  url: string,
  options: {
    size: number;
    timeoutMs: number;
    client: ClientOptions;
    /**
     * Also bound each statement of a transaction (and of a reserved connection) from here, by a
     * cancel request once `timeoutMs` has passed: for connections on which Postgres's
     * `statement_timeout` cannot be set (through a transaction pooler, which refuses it as a
     * startup parameter and would not keep it as a setting).
     */
    boundStatements?: boolean;
  },
): BoundedPool {
  const { timeoutMs } = options;
  const inner = <T extends object>(sql: T): T => (options.boundStatements ? statementsBounded(sql, timeoutMs) : sql);
  const clients = Array.from({ length: Math.max(1, options.size) }, () => postgres(url, { ...options.client, max: 1 }));
  const first = clients[0]!;
  // One pool to postgres.js's eyes in what it keeps per client: the failed attempts its backoff
  // counts, which array type goes with each type (read when `sql.array` values are sent: the lane
  // that fetched the types may not be the one sending), and how each type is written and read. A
  // connection reads the array types when it opens, and does not retry a read that failed (its
  // `fetchArrayTypes`): alone, a lane whose read failed (the database or a pooler going away at
  // that moment) would write an array as `a,b`, which Postgres refuses (`22P02`), and read one as
  // text. Writers are looked up as they are used, so every lane takes the first's; each
  // connection holds on to its own readers, so a reader set on any lane (what a read of the types
  // adds, drizzle's own on `sql.options`) is set on every lane's.
  const firstOptions = first.options as unknown as Record<'shared' | 'parsers' | 'serializers', Record<string, unknown>>;
  const parsers = everywhere(clients.map((client) => (client.options as unknown as typeof firstOptions).parsers));
  for (const client of clients) {
    Object.assign(client.options, { shared: firstOptions.shared, serializers: firstOptions.serializers, parsers });
  }
  const line = new Line(clients.map((client) => ({ client, start: (empty(client) as DriverQuery).handler })));
  let ending = false;
  const ended = () => Object.assign(new Error('the database pool is closed'), { code: 'CONNECTION_ENDED' });

  /** A query of the pool's, when first awaited: its turn, then its lane, bounded from now. */
  function ask(query: DriverQuery): void {
    if (ending) {
      query.reject(ended());
      return;
    }
    // What the query's caller awaits; postgres.js settles the query through the wrapped pair
    // below, which is how the lane learns that its connection is done with it.
    const { resolve, reject } = query;
    let handed = false;
    const timer = setTimeout(() => {
      if (!handed) withdraw();
      else if (query.state) {
        // Running: Postgres is asked to stop it (one use, as `query.cancel()`, which would drop
        // the cancel's own failure unhandled).
        const cancel = query.canceller;
        query.canceller = null;
        cancel?.(query).catch(() => undefined);
      } else unsendable(query);
      reject(new DatabaseTimeout(timeoutMs));
    }, timeoutMs);
    const withdraw = line.wait(
      (lane) => {
        handed = true;
        let done = false;
        const finished = (error?: unknown) => {
          if (done) return;
          done = true;
          clearTimeout(timer);
          freeLater(lane, error);
        };
        query.resolve = (value) => {
          finished();
          resolve(value);
        };
        query.reject = (error) => {
          finished(error);
          reject(error);
        };
        // The lane has nothing else: the query starts now on its open connection, or is the
        // first of the connection it (re)opens.
        lane.start(query);
      },
      (error) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  }

  /**
   * Gives the lane to the next use, never from inside postgres.js's own handling (which settles a
   * query before it has moved the connection on). After a success or an error Postgres answered,
   * the connection is idle again by the next microtask. After any other failure it may be dying:
   * the socket's `error` comes a phase before its `close`, and a query handed over in between
   * would be written to a dead socket and never answered. A timer runs after the close.
   */
  function freeLater(lane: Lane, error?: unknown): void {
    if (answeredByStandby(error)) {
      // Its connection is on a server that cannot write (a standby, or a primary demoted under
      // it): opened again, it goes where the URL says now (`target_session_attrs=primary` picks
      // the new primary; a moving endpoint, wherever it points). Kept, every write on it would
      // fail until the server was promoted, if ever. Given to the next use once closed.
      const close = (lane.client as unknown as { close(): Promise<void> }).close();
      void close.catch(() => undefined).then(() => line.free(lane));
    } else if (error === undefined || error instanceof postgres.PostgresError) queueMicrotask(() => line.free(lane));
    else setTimeout(() => line.free(lane), 0);
  }

  function bound<T>(value: T): T {
    if (isDriverQuery(value)) value.handler = ask;
    return value;
  }

  function begin(...args: unknown[]): Promise<unknown> {
    const callback = args.length > 1 ? args[1] : args[0];
    const mode = args.length > 1 ? (args[0] as string) : undefined;
    return new Promise((resolve, reject) => {
      if (ending) return reject(ended());
      let phase: 'waiting' | 'opening' | 'running' | 'given up' = 'waiting';
      const timer = setTimeout(() => {
        if (phase === 'running') return;
        if (phase === 'waiting') withdraw();
        phase = 'given up';
        reject(new DatabaseTimeout(timeoutMs));
      }, timeoutMs);
      const withdraw = line.wait(
        (lane) => {
          phase = 'opening';
          const started = (tx: unknown) => {
            // Given up before it started: the callback never runs, and postgres.js rolls back.
            if (phase === 'given up') throw new DatabaseTimeout(timeoutMs);
            phase = 'running';
            clearTimeout(timer);
            return (callback as (tx: unknown) => unknown)(inner(tx as object));
          };
          const opened = mode === undefined ? lane.client.begin(started) : lane.client.begin(mode, started);
          opened.then(
            (value) => {
              freeLater(lane);
              clearTimeout(timer);
              resolve(value);
            },
            (error: unknown) => {
              freeLater(lane, error);
              clearTimeout(timer);
              reject(error);
            },
          );
        },
        (error) => {
          clearTimeout(timer);
          reject(error);
        },
      );
    });
  }

  function reserve(): Promise<postgres.ReservedSql> {
    return new Promise((resolve, reject) => {
      if (ending) return reject(ended());
      let phase: 'waiting' | 'reserving' | 'granted' | 'given up' = 'waiting';
      let lane: Lane | undefined;
      const timer = setTimeout(() => {
        if (phase === 'granted') return;
        if (phase === 'waiting') withdraw();
        phase = 'given up';
        // The lane is free at once: a reservation postgres.js grants later is handed back as it
        // comes (below), and what the lane serves meanwhile waits behind it in postgres.js's line.
        if (lane) freeLater(lane, 'reserving');
        reject(new DatabaseTimeout(timeoutMs));
      }, timeoutMs);
      const withdraw = line.wait(
        (granted) => {
          phase = 'reserving';
          lane = granted;
          granted.client.reserve().then(
            (reserved) => {
              if (phase === 'given up') return reserved.release();
              const release = reserved.release.bind(reserved);
              let released = false;
              reserved.release = () => {
                if (released) return;
                released = true;
                release();
                freeLater(granted, 'released');
              };
              phase = 'granted';
              clearTimeout(timer);
              resolve(inner(reserved));
            },
            (error: unknown) => {
              if (phase === 'given up') return;
              freeLater(granted, error);
              clearTimeout(timer);
              reject(error);
            },
          );
        },
        (error) => {
          clearTimeout(timer);
          reject(error);
        },
      );
    });
  }

  async function end(endOptions?: { timeout?: number }): Promise<void> {
    ending = true;
    line.refuseAll(ended());
    await Promise.all(clients.map((client) => client.end(endOptions)));
  }

  const own: Record<PropertyKey, unknown> = {
    unsafe: (...args: Parameters<Sql['unsafe']>) => bound(first.unsafe(...args)),
    notify: (channel: string, payload: string) => bound(first`select pg_notify(${channel}, ${String(payload)})`),
    begin,
    reserve,
    end,
    close: () => Promise.all(clients.map((client) => (client as unknown as { close(): Promise<void> }).close())).then(() => undefined),
  };
  const sql = new Proxy(first, {
    apply: (target, thisArg, args) => bound(Reflect.apply(target as unknown as (...a: unknown[]) => unknown, thisArg, args)),
    get: (target, key) => (Object.hasOwn(own, key) ? own[key] : Reflect.get(target, key)),
  });
  return { sql, end };
}

/**
 * Postgres's `read_only_sql_transaction`: a write on a server that is not (or no longer) the
 * primary. Looked for under what wrapped it too (drizzle's error, a transaction's callback).
 */
function answeredByStandby(error: unknown): boolean {
  for (let cause = error, depth = 0; cause instanceof Error && depth < 5; cause = cause.cause, depth++) {
    if (cause instanceof postgres.PostgresError && cause.code === '25006') return true;
  }
  return false;
}

/**
 * `sql` (a transaction's or a reserved connection's) whose every statement is bounded by
 * `timeoutMs` from when it is handed to the connection: past it, Postgres is asked to stop it (a
 * cancel request, which a transaction pooler passes on to the server connection the client holds),
 * and the statement fails as a `statement_timeout` would have failed it (`57014`).
 */
function statementsBounded<T extends object>(sql: T, timeoutMs: number): T {
  const watched = <V>(value: V): V => {
    if (!isDriverQuery(value)) return value;
    const hand = value.handler;
    value.handler = (query) => {
      const { resolve, reject } = query;
      const timer = setTimeout(() => {
        const cancel = query.canceller;
        query.canceller = null;
        cancel?.(query).catch(() => undefined);
      }, timeoutMs);
      query.resolve = (result) => {
        clearTimeout(timer);
        resolve(result);
      };
      query.reject = (error) => {
        clearTimeout(timer);
        reject(error);
      };
      hand(query);
    };
    return value;
  };
  return new Proxy(sql, {
    apply: (target, thisArg, args) => watched(Reflect.apply(target as (...a: unknown[]) => unknown, thisArg, args)),
    get: (target, key) => {
      const value = Reflect.get(target, key);
      return key === 'unsafe' && typeof value === 'function'
        ? (...args: unknown[]) => watched((value as (...a: unknown[]) => unknown).apply(target, args))
        : value;
    },
  });
}

/**
 * The lanes and the uses waiting for one, first come first served. A free lane is taken last in,
 * first out, so light traffic keeps few connections open (the others close when idle).
 */
class Line {
  private readonly idle: Lane[];
  private readonly waiting: Array<{ grant: (lane: Lane) => void; refuse: (error: Error) => void }> = [];

  constructor(lanes: Lane[]) {
    this.idle = [...lanes];
  }

  /** Grants a lane now or in turn; the function returned withdraws the wait (false if it was granted). */
  wait(grant: (lane: Lane) => void, refuse: (error: Error) => void): () => boolean {
    const lane = this.idle.pop();
    if (lane) {
      grant(lane);
      return () => false;
    }
    const waiter = { grant, refuse };
    this.waiting.push(waiter);
    return () => {
      const index = this.waiting.indexOf(waiter);
      if (index === -1) return false;
      this.waiting.splice(index, 1);
      return true;
    };
  }

  free(lane: Lane): void {
    const next = this.waiting.shift();
    if (next) next.grant(lane);
    else this.idle.push(lane);
  }

  refuseAll(error: Error): void {
    for (const waiter of this.waiting.splice(0)) waiter.refuse(error);
  }
}

interface Lane {
  /** A postgres.js client of one connection. */
  readonly client: Sql;
  /** How that client gives a query to its connection (what its own queries' `handler` is). */
  readonly start: (query: DriverQuery) => void;
}

/** The parts of a postgres.js query used here (node_modules/postgres/src/query.js). */
interface DriverQuery extends Promise<unknown> {
  /** Called once, when the query is first awaited or executed, to give it to a connection. */
  handler: (query: DriverQuery) => void;
  /** Settle what the query's caller awaits (a later settle changes nothing). */
  resolve(value: unknown): void;
  reject(error: unknown): void;
  /** The connection's backend once a connection has taken the query (sent it): null before. */
  state: unknown;
  strings: readonly string[];
  args: unknown[];
  /** Asks Postgres to stop the query once it runs; set to null after its one use. */
  canceller: ((query: DriverQuery) => Promise<void>) | null;
}

function isDriverQuery(value: unknown): value is DriverQuery {
  return value instanceof Promise && typeof (value as { handler?: unknown }).handler === 'function';
}

/**
 * Makes a query that no connection has taken yet fail, if one ever does, before anything of it
 * is sent: building it meets an undefined value and throws, which postgres.js turns into the
 * query's failure, then syncs the connection and goes on (connection.js `execute`). Used instead
 * of `cancel()`, which would leave a connection that was (re)opening for the query stuck.
 */
function unsendable(query: DriverQuery): void {
  query.strings = UNSENDABLE;
  query.args = [undefined];
}
const UNSENDABLE: readonly string[] = Object.freeze(['', '']);

/** A query of `client` that is never sent: only read for its `handler`. */
function empty(client: Sql): unknown {
  return client``;
}

/** An object whose writes go to every one of `targets`, read from the first. */
function everywhere(targets: Record<string, unknown>[]): Record<string, unknown> {
  return new Proxy(targets[0]!, {
    set: (_target, key, value) => {
      for (const target of targets) Reflect.set(target, key, value);
      return true;
    },
  });
}
