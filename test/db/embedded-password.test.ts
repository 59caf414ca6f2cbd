import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, stat, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/database.js';
import { type EmbeddedDatabase, startEmbeddedPostgres } from '../../src/db/embedded.js';
import { PASSWORD_FILE } from '../../src/db/embedded-password.js';
import { applyMigrations } from '../../src/db/migrate.js';
import { createLogger } from '../../src/logger.js';
import { noteOperatorKeys } from '../../src/operators/audit.js';
import { runCli } from '../operators/support.js';
import { dataFolderParent } from '../support/data-folder.js';

/**
 * The embedded Postgres's password: one of its own per data folder, kept in the folder for its
 * owner alone, reused at every start, never logged; a folder from before (`postgres`/`postgres`)
 * upgraded in place; and the operator CLI reaching the database of a broker running on the folder.
 * One folder goes through it all, in order: each start of the embedded Postgres takes seconds.
 */

let dataDir: string;
let server: EmbeddedDatabase | undefined;
let logs = '';
const logger = createLogger('debug', { write: (line: string) => (logs += line) });

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(await dataFolderParent(), 'omb-pg-password-'));
});
afterAll(async () => {
  await server?.stop();
  await rm(dataDir, { recursive: true, force: true });
}, 60_000);

const start = async () => {
  server = await startEmbeddedPostgres({ dataDir, logger, extraFlags: ['-c', 'fsync=off'] });
  return server;
};
const stop = async () => {
  await server?.stop();
  server = undefined;
};
const passwordFile = () => path.join(dataDir, PASSWORD_FILE);
const filePassword = async () => (await readFile(passwordFile(), 'utf8')).trim();
const passwordOf = (url: string) => decodeURIComponent(new URL(url).password);
const mode = async (file: string) => (await stat(file)).mode & 0o777;

/** Connects with this URL, or with its user and another password; the error's SQLSTATE when refused. */
async function tryConnect(url: string, password?: string): Promise<'connected' | string> {
  const target = new URL(url);
  if (password !== undefined) target.password = encodeURIComponent(password);
  const sql = postgres(target.toString(), { max: 1, onnotice: () => {}, connect_timeout: 10 });
  try {
    await sql`select 1`;
    return 'connected';
  } catch (error) {
    return (error as { code?: string }).code ?? String(error);
  } finally {
    await sql.end({ timeout: 5 });
  }
}

describe('the embedded Postgres’s password', () => {
  it('is made for a new folder, kept in it for its owner alone, never logged, and postgres/postgres is refused', async () => {
    const { url } = await start();
    const password = await filePassword();
    expect(password).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(passwordOf(url)).toBe(password);
    expect(await mode(passwordFile())).toBe(0o600);
    // As root the folder must still let Postgres's own user through to postgres/ (x, no r or w).
    expect(await mode(dataDir)).toBe(process.getuid?.() === 0 ? 0o711 : 0o700);
    expect(existsSync(`${passwordFile()}.new`)).toBe(false);

    expect(await tryConnect(url)).toBe('connected');
    expect(await tryConnect(url, 'postgres')).toBe('28P01'); // invalid_password
    expect(logs).toContain('embedded Postgres started');
    expect(logs).not.toContain(password);
    expect(logs).not.toContain(encodeURIComponent(password));
  }, 90_000);

  it('is the same at the next start', async () => {
    const before = await filePassword();
    await stop();
    const { url } = await start();
    expect(passwordOf(url)).toBe(before);
    expect(await filePassword()).toBe(before);
    expect(await tryConnect(url)).toBe('connected');
  }, 60_000);

  it('is reached by the operator CLI on the folder while a broker runs there, which it leaves running', async () => {
    const running = server!;
    await applyMigrations(running.url, logger);
    // Something the broker wrote, for the CLI to find.
    const database = openDatabase({ url: running.url, poolSize: 1, logger });
    try {
      expect(await noteOperatorKeys(database.db, ['kid-cli'], new Date())).toBe(true);
    } finally {
      await database.close();
    }
    // DATA_DIR alone: the CLI finds the running server's port and the folder's password itself.
    const trail = await runCli(['audit', '--action', 'operator-keys.change', '--json'], { DATA_DIR: dataDir });
    expect(trail.stderr).toBe('');
    expect(trail.code).toBe(0);
    expect(JSON.parse(trail.stdout).entries[0]).toMatchObject({ action: 'operator-keys.change', details: { kids: ['kid-cli'] } });
    expect(await tryConnect(running.url), 'the broker’s Postgres still up').toBe('connected');
    expect(trail.stdout + trail.stderr).not.toContain(await filePassword());
  }, 60_000);

  it('replaces postgres/postgres in a folder made before passwords were per folder, keeping its data', async () => {
    // The folder as the earlier broker left it: password `postgres`, sent in clear (`password`
    // in pg_hba.conf), no password file; and something in it to keep.
    const old = await postgres(server!.url, { max: 1, onnotice: () => {} });
    try {
      await old`alter role postgres password 'postgres'`;
      await old`create table kept_from_before (note text)`;
      await old`insert into kept_from_before values ('still here')`;
    } finally {
      await old.end({ timeout: 5 });
    }
    await stop();
    const hba = path.join(dataDir, 'postgres', 'pg_hba.conf');
    await writeFile(hba, (await readFile(hba, 'utf8')).replaceAll('scram-sha-256', 'password'));
    await unlink(passwordFile());
    logs = '';

    const { url } = await start();
    const password = await filePassword();
    expect(password).not.toBe('postgres');
    expect(passwordOf(url)).toBe(password);
    expect(await mode(passwordFile())).toBe(0o600);
    expect(await tryConnect(url, 'postgres')).toBe('28P01');
    expect(logs).toContain('given a password of its own');
    expect(logs).not.toContain(password);
    const sql = postgres(url, { max: 1, onnotice: () => {} });
    try {
      expect(await sql`select note from kept_from_before`).toEqual([{ note: 'still here' }]);
    } finally {
      await sql.end({ timeout: 5 });
    }
  }, 90_000);
});
