import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chown, mkdtemp, rm } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import postgres from 'postgres';
import { freePort } from '../../src/db/embedded.js';
import { dataFolderParent } from './data-folder.js';

/**
 * Debian's Postgres 15 (`apt-get install postgresql-15`), for the `system` project's tests
 * (`*.system.test.ts`): a server of its own, and its tools (`pg_dump`), which the embedded
 * Postgres does not ship.
 */
export const PG_BIN = '/usr/lib/postgresql/15/bin';

const run = promisify(execFile);

/** Never skipped: without the package, a test using it fails and says how to get it. */
function requirePostgres15(tools: readonly string[] = ['initdb', 'postgres']): void {
  const missing = tools.filter((tool) => !existsSync(path.join(PG_BIN, tool)));
  if (missing.length > 0) throw new Error(`${missing.join(', ')} of Postgres 15 missing: \`apt-get install postgresql-15\``);
}

/** Postgres refuses to run as root: as root, everything runs as Debian's `postgres` user (made by the postgresql-common package). */
export async function runAsUser(): Promise<{ uid?: number; gid?: number }> {
  if (process.getuid?.() !== 0) return {};
  const id = async (flag: string) => Number.parseInt((await run('id', [flag, 'postgres'])).stdout, 10);
  return { uid: await id('-u'), gid: await id('-g') };
}

export interface DebianPostgres {
  /** The superuser's URL to `database` (trusted on loopback: the server is the test's alone). */
  url(database?: string): string;
  /** `pg_dump` of `database` in its plain format: the SQL text a dump file holds. */
  dump(database: string): Promise<string>;
  /** Stops the server (fast shutdown) and removes its folder. */
  stop(): Promise<void>;
}

/** A fresh Postgres 15 server in a temporary folder, on a free loopback port. */
export async function startDebianPostgres(): Promise<DebianPostgres> {
  requirePostgres15(['initdb', 'postgres', 'pg_dump']);
  const runAs = await runAsUser();
  // As `postgres`: a clean environment, not this user's, with messages in English.
  const env = { PATH: '/usr/bin:/bin', LANG: 'C.UTF-8', LC_MESSAGES: 'C' };
  const asUser = { ...runAs, env };
  const dir = await mkdtemp(path.join(await dataFolderParent(), 'omb-pg15-'));
  if (runAs.uid !== undefined && runAs.gid !== undefined) await chown(dir, runAs.uid, runAs.gid);
  const dataDir = path.join(dir, 'data');
  await run(path.join(PG_BIN, 'initdb'), ['-D', dataDir, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C.UTF-8'], asUser);

  const port = await freePort();
  let output = '';
  const server: ChildProcess = spawn(
    path.join(PG_BIN, 'postgres'),
    ['-D', dataDir, '-p', String(port), '-k', dir, '-c', 'listen_addresses=127.0.0.1', '-c', 'fsync=off'],
    { ...asUser, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  server.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  server.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  const exited = new Promise<void>((resolve) => server.once('exit', () => resolve()));

  const url = (database = 'postgres') => `postgres://postgres@127.0.0.1:${port}/${database}`;
  const stop = async () => {
    if (server.exitCode === null && server.signalCode === null) server.kill('SIGINT');
    await exited;
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await accepting(
      url(),
      () => server.exitCode !== null,
      () => output,
    );
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    url,
    async dump(database) {
      const { stdout } = await run(path.join(PG_BIN, 'pg_dump'), ['-h', '127.0.0.1', '-p', String(port), '-U', 'postgres', database], {
        ...asUser,
        maxBuffer: 256 * 1024 * 1024,
      });
      return stdout;
    },
    stop,
  };
}

/** Until the server answers a query; fails with its output if it exits or takes longer than 30 s. */
async function accepting(url: string, gone: () => boolean, output: () => string): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const sql = postgres(url, { max: 1, connect_timeout: 2, onnotice: () => {} });
    try {
      await sql`select 1`;
      return;
    } catch (error) {
      if (gone() || Date.now() > deadline) throw new Error(`Postgres 15 did not start: ${String(error)}\n${output()}`);
    } finally {
      await sql.end({ timeout: 1 });
    }
    await sleep(100);
  }
}
