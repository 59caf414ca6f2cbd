import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { type EmbeddedDatabase, freePort, startEmbeddedPostgres } from '../src/db/embedded.js';
import { startPgBouncer } from '../test/support/pgbouncer.js';
import { startReplicatedPostgres } from '../test/support/replication.js';

/**
 * The soak's Postgres (bench/soak.ts): one embedded server, which the Postgres fault stops and
 * starts again on the same port and data folder; or, with `--standby`, a primary and a
 * synchronous standby (test/support/replication.ts) behind one moving address, which the fault
 * fails over. With `--pooled`, PgBouncer in transaction mode in front of either (`pgBouncerInFront`).
 */
export interface SoakDatabase {
  /** Where the brokers connect (for the standby pair, the address that follows the primary). */
  readonly url: string;
  readonly description: string;
  /** The database fault: its name, and how long the database was away. */
  readonly faultName: 'postgres_restart' | 'failover';
  fault(outageMs: number): Promise<Record<string, unknown>>;
  stop(): Promise<void>;
}

export async function embeddedDatabase(dataDir: string, logger: Logger): Promise<SoakDatabase> {
  const port = await freePort();
  // The brokers' two pools plus the soak's own, with room to see a leak rather than be refused.
  const start = () => startEmbeddedPostgres({ dataDir, logger, port, database: 'omb_soak', extraFlags: ['-c', 'max_connections=200'] });
  let server: EmbeddedDatabase | undefined = await start();
  const url = server.url;
  return {
    url,
    description: 'one embedded Postgres',
    faultName: 'postgres_restart',
    async fault(outageMs) {
      const stoppingAt = performance.now();
      await server?.stop();
      server = undefined;
      const stoppedMs = performance.now() - stoppingAt;
      await sleep(outageMs);
      const startingAt = performance.now();
      server = await start();
      return { stopMs: Math.round(stoppedMs), downMs: outageMs, startMs: Math.round(performance.now() - startingAt) };
    },
    async stop() {
      await server?.stop();
      server = undefined;
    },
  };
}

export async function replicatedDatabase(logger: Logger): Promise<SoakDatabase> {
  const pair = await startReplicatedPostgres({ synchronous: true, logger });
  return {
    url: pair.url,
    description: 'a primary and a synchronous standby behind one address',
    faultName: 'failover',
    async fault(outageMs) {
      const { killedAt, promotedAt, endpointUpAt } = await pair.failover({ outageMs });
      return { downMs: outageMs, promotedAfterMs: promotedAt - killedAt, endpointUpAfterMs: endpointUpAt - killedAt };
    },
    stop: () => pair.stop(),
  };
}

/**
 * PgBouncer (test/support/pgbouncer.ts) in transaction mode in front of the soak's Postgres, as
 * `--pooled` runs it: the brokers' `DATABASE_URL` is the bouncer, their `DATABASE_DIRECT_URL`
 * the database's own URL. Its upstream is that URL's address, so with `--standby` it follows the
 * moving address to whichever server is the primary. Its fault is `kill -9`, then a start again
 * on the same port.
 */
export interface SoakPooler {
  /** The brokers' `DATABASE_URL`: the bouncer, to the soak's database. */
  readonly url: string;
  /** `default_pool_size`: the server connections the bouncer may hold for the brokers' database and user. */
  readonly serverPoolSize: number;
  readonly description: string;
  readonly faultName: 'pgbouncer_kill';
  fault(outageMs: number): Promise<Record<string, unknown>>;
  /** The last lines the bouncer logged (across its starts), for a failing run's report. */
  logTail(lines: number): Promise<string>;
  stop(): Promise<void>;
}

export async function pgBouncerInFront(database: SoakDatabase, serverPoolSize: number): Promise<SoakPooler> {
  const bouncer = await startPgBouncer({ upstream: database.url, poolSize: serverPoolSize });
  return {
    url: bouncer.url(),
    serverPoolSize,
    description: `PgBouncer in transaction mode (server pool ${serverPoolSize})`,
    faultName: 'pgbouncer_kill',
    async fault(outageMs) {
      const killingAt = performance.now();
      await bouncer.kill();
      const killMs = performance.now() - killingAt;
      await sleep(outageMs);
      const startingAt = performance.now();
      await bouncer.start();
      return { killMs: Math.round(killMs), downMs: outageMs, startMs: Math.round(performance.now() - startingAt) };
    },
    async logTail(lines) {
      return (await bouncer.log()).trimEnd().split('\n').slice(-lines).join('\n');
    },
    stop: () => bouncer.stop(),
  };
}
