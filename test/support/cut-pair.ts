import { rm } from 'node:fs/promises';
import postgres from 'postgres';
import { type EmbeddedDatabase, freePort, startEmbeddedPostgres } from '../../src/db/embedded.js';
import { createLogger } from '../../src/logger.js';
import { type BrokerProcess, startBroker } from './broker-process.js';
import { initialisedFolder } from './data-folder.js';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.js';

/**
 * Two broker processes on one embedded Postgres: A reaches it through a proxy the test can cut,
 * B directly. The setting of the tests where one process loses its database while another keeps
 * it. B starts first, then A.
 */
export interface CutPair {
  readonly a: BrokerProcess;
  readonly b: BrokerProcess;
  /** A's way to Postgres. */
  readonly proxy: TcpProxy;
  /** The test's own connection (it reconnects after a restart). */
  readonly db: postgres.Sql;
  /** Postgres itself, as started last. */
  postgres(): EmbeddedDatabase;
  /** Stops Postgres, then starts it again on the same port and folder. */
  stopPostgres(): Promise<void>;
  startPostgres(): Promise<void>;
  /** `performance.now()` once A said it listens. */
  readonly aListeningAt: number;
  close(): Promise<void>;
}

export async function startCutPair(name: string, env: Record<string, string>): Promise<CutPair> {
  const dataDir = await initialisedFolder(`omb-${name}-`);
  const port = await freePort();
  const start = () => startEmbeddedPostgres({ dataDir, logger: createLogger('silent'), port, extraFlags: ['-c', 'fsync=off'] });
  let pg = await start();
  const db = postgres(pg.url, { max: 2, onnotice: () => {} });
  const proxy = await startTcpProxy({ host: '127.0.0.1', port });
  const viaProxy = new URL(pg.url);
  viaProxy.port = String(proxy.port);
  let a: BrokerProcess | undefined;
  let b: BrokerProcess | undefined;
  const close = async () => {
    await Promise.all([a?.stop('SIGKILL'), b?.stop('SIGKILL')]);
    await proxy.close();
    await db.end({ timeout: 1 });
    await pg.stop();
    await rm(dataDir, { recursive: true, force: true });
  };
  try {
    b = await startBroker({ ...env, DATABASE_URL: pg.url });
    a = await startBroker({ ...env, DATABASE_URL: viaProxy.toString() });
  } catch (error) {
    await close();
    throw error;
  }
  return {
    a,
    b,
    proxy,
    db,
    postgres: () => pg,
    stopPostgres: () => pg.stop(),
    async startPostgres() {
      pg = await start();
    },
    aListeningAt: performance.now(),
    close,
  };
}
