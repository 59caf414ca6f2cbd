import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { buildTestApp, register, type TestApp } from '../support/app.js';
import { dataFolderParent } from '../support/data-folder.js';
import { withDatabase } from '../support/database.js';
import { runCli } from './support.js';

let t: TestApp;
let dir: string;
beforeAll(async () => {
  t = await buildTestApp();
  dir = await mkdtemp(path.join(tmpdir(), 'omb-import-'));
});
afterAll(async () => {
  await t.close();
  await rm(dir, { recursive: true, force: true });
});

/** An installation as the first version stored it, and the token only its owner knows. */
function firstVersionInstallation(overrides: Record<string, string | number | null> = {}) {
  const token = randomBytes(32).toString('hex');
  const id = randomUUID();
  return {
    token,
    row: {
      id,
      token_hash: createHash('sha256').update(token).digest('hex'),
      composio_user_id: `omb_${id.replaceAll('-', '')}`,
      session_id: `trs_${randomBytes(6).toString('hex')}`,
      created_at: '2025-04-01 09:30:00',
      last_seen_at: '2025-06-01T10:00:00.000Z',
      disabled_at: null as string | number | null,
      ...overrides,
    },
  };
}

type Row = ReturnType<typeof firstVersionInstallation>['row'];

const COLUMNS = ['id', 'token_hash', 'composio_user_id', 'session_id', 'created_at', 'last_seen_at', 'disabled_at'] as const;
const csvLine = (row: Partial<Row>) =>
  COLUMNS.map((c) => {
    const value = row[c];
    return value === null || value === undefined
      ? ''
      : /[",\n]/.test(String(value))
        ? `"${String(value).replaceAll('"', '""')}"`
        : String(value);
  }).join(',');

async function exportFile(name: string, text: string): Promise<string> {
  const file = path.join(dir, name);
  await writeFile(file, text);
  return file;
}

const importFile = (file: string, ...extra: string[]) => runCli(['import', '--file', file, ...extra], { DATABASE_URL: t.database.url });
const me = (token: string) => t.app.inject({ method: 'GET', url: '/v1/me', headers: { authorization: `Bearer ${token}` } });

describe('import of first-version installations', () => {
  it('keeps a first-version token working after a CSV import, and reports the rows it left out', async () => {
    const kept = firstVersionInstallation();
    const present = await register(t.app);
    const existing = firstVersionInstallation({
      id: present.installationId,
      composio_user_id: `omb_${present.installationId.replaceAll('-', '')}`,
    });
    const badId = firstVersionInstallation({ id: 'not-a-uuid' });
    const badHash = firstVersionInstallation({ token_hash: 'abc123' });
    const wrongUser = firstVersionInstallation({ composio_user_id: 'omb_someoneelse' });
    const badTime = firstVersionInstallation({ created_at: 'yesterday' });

    const csv = [
      COLUMNS.join(','),
      csvLine(kept.row),
      csvLine(existing.row),
      csvLine(badId.row),
      csvLine(badHash.row),
      csvLine(wrongUser.row),
      csvLine(badTime.row),
      csvLine({ ...kept.row, id: randomUUID() }),
      'just,three,fields',
      '',
    ].join('\r\n');
    const file = await exportFile('export.csv', csv);

    const run = await importFile(file);
    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(/^imported 1, skipped 1 \(already present\), invalid 6 — 8 rows from /);
    expect(run.stderr).toContain('line 4: id must be a UUID');
    expect(run.stderr).toContain('line 5: token_hash must be a SHA-256');
    expect(run.stderr).toContain('line 6: composio_user_id must be omb_ followed by the id without dashes');
    expect(run.stderr).toContain('line 7: created_at must be a date and time');
    expect(run.stderr).toContain('line 8: composio_user_id');
    expect(run.stderr).toContain('line 9: has 3 fields where the header has 7');
    for (const { row } of [kept, existing, badId, badHash, wrongUser, badTime]) {
      expect(`${run.stdout}${run.stderr}`).not.toContain(row.token_hash);
    }

    const response = await me(kept.token);
    expect(response.statusCode).toBe(200);
    expect(response.json()).toMatchObject({ installationId: kept.row.id, plan: 'standard', createdAt: '2025-04-01T09:30:00.000Z' });
    const [stored] = await t.database.sql`select composio_user_id, session_id from installations where id = ${kept.row.id}`;
    expect(stored).toEqual({ composio_user_id: kept.row.composio_user_id, session_id: kept.row.session_id });
    for (const { row } of [badId, badHash, wrongUser, badTime]) {
      expect(await t.database.sql`select 1 from installations where token_hash = ${row.token_hash}`).toHaveLength(0);
    }
    // The installation already here is untouched: its own token still works.
    expect((await me(present.token)).statusCode).toBe(200);
  });

  it('imports a JSON export, keeps disabled ones disabled, and skips everything on a second run', async () => {
    const plain = firstVersionInstallation({ last_seen_at: 1_748_772_000, session_id: null });
    const disabled = firstVersionInstallation({ disabled_at: '2025-05-05T05:05:05+02:00' });
    const file = await exportFile('export.json', JSON.stringify([plain.row, disabled.row], null, 2));

    const run = await importFile(file);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^imported 2, skipped 0 \(already present\), invalid 0/);
    const [row] = await t.database.sql`select last_seen_at, session_id from installations where id = ${plain.row.id}`;
    expect(new Date(row!.last_seen_at).toISOString()).toBe('2025-06-01T10:00:00.000Z');
    expect(row!.session_id).toBeNull();
    expect((await me(plain.token)).statusCode).toBe(200);
    expect((await me(disabled.token)).statusCode).toBe(403);
    const [off] = await t.database.sql`select disabled_at from installations where id = ${disabled.row.id}`;
    expect(new Date(off!.disabled_at).toISOString()).toBe('2025-05-05T03:05:05.000Z');

    const again = await importFile(file);
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/^imported 0, skipped 2 \(already present\), invalid 0/);
  });

  it('refuses a row whose token hash already belongs to another installation, and repeats within one file', async () => {
    const first = firstVersionInstallation();
    const file = await exportFile('first.json', JSON.stringify([first.row]));
    expect((await importFile(file)).code).toBe(0);

    const clash = firstVersionInstallation({ token_hash: first.row.token_hash });
    const twice = firstVersionInstallation();
    const clashing = await exportFile('clash.json', JSON.stringify([clash.row, twice.row, twice.row, 'not a row']));
    const run = await importFile(clashing);
    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(/^imported 1, skipped 0 \(already present\), invalid 3/);
    expect(run.stderr).toContain('entry 1: its token_hash belongs to another installation');
    expect(run.stderr).toContain('entry 3: repeats the id of entry 2');
    expect(run.stderr).toContain('entry 4: is not an object');
    expect((await me(first.token)).json().installationId).toBe(first.row.id);
  });

  it('writes nothing on a dry run', async () => {
    const row = firstVersionInstallation();
    const file = await exportFile('dry.csv', `${COLUMNS.join(',')}\n${csvLine(row.row)}\n`);
    const run = await importFile(file, '--dry-run');
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^would import 1, .*\(dry run: nothing written\)/);
    expect((await me(row.token)).statusCode).toBe(401);
  });

  it('reads the format from --format when the name does not tell', async () => {
    const row = firstVersionInstallation();
    const file = await exportFile('export.txt', JSON.stringify([row.row]));
    expect((await importFile(file, '--format', 'csv')).code).toBe(1);
    const run = await importFile(file, '--format', 'json');
    expect(run.code).toBe(0);
    expect((await me(row.token)).statusCode).toBe(200);
    expect((await importFile(file, '--format', 'xml')).code).toBe(2);
  });

  it('fails with one line for a file that is not an export', async () => {
    const run = await importFile(await exportFile('broken.json', '{"id":'));
    expect(run.code).toBe(1);
    expect(run.stderr.trim().split('\n')).toHaveLength(1);
    expect(run.stderr).toMatch(/not valid JSON/);
    const headerless = await importFile(await exportFile('headerless.csv', 'id,token_hash\n'));
    expect(headerless.code).toBe(1);
    expect(headerless.stderr).toMatch(/lacks the columns composio_user_id, created_at/);
  });
});

describe('migrate', () => {
  it('migrates an empty database named by DATABASE_URL', async () => {
    const adminUrl = inject('pgAdminUrl');
    const name = `omb_migrate_${randomBytes(6).toString('hex')}`;
    const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
    await admin.unsafe(`create database ${name}`);
    try {
      const url = withDatabase(adminUrl, name);
      const run = await runCli(['migrate'], { DATABASE_URL: url });
      expect(run.code).toBe(0);
      expect(run.stdout).toMatch(new RegExp(`^migrations applied to .*/${name}\\n$`));
      expect(run.stdout).not.toContain('@');
      const db = postgres(url, { max: 1, onnotice: () => {} });
      try {
        expect(await db`select 1 from information_schema.tables where table_name = 'grants'`).toHaveLength(1);
      } finally {
        await db.end();
      }
    } finally {
      await admin.unsafe(`drop database if exists ${name} with (force)`);
      await admin.end();
    }
  });

  it('migrates the embedded Postgres in DATA_DIR without DATABASE_URL, and stops it afterwards', async () => {
    // A folder of its own: as root, Postgres runs as its own user and must be able to reach it.
    const dataDir = await mkdtemp(path.join(await dataFolderParent(), 'omb-migrate-'));
    try {
      const run = await runCli(['migrate'], { DATA_DIR: dataDir });
      expect(run.stderr).toBe('');
      expect(run.code).toBe(0);
      expect(run.stdout).toBe(`migrations applied to the embedded Postgres in ${dataDir}\n`);
      expect(existsSync(path.join(dataDir, 'postgres', 'PG_VERSION'))).toBe(true);
      expect(existsSync(path.join(dataDir, 'postgres', 'postmaster.pid'))).toBe(false);
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  }, 90_000);

  it('reports a bad configuration in one line', async () => {
    const run = await runCli(['migrate'], { DATABASE_URL: 'mysql://nope' });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^omb-cli migrate: invalid configuration: DATABASE_URL: must be a postgres:\/\/ URL\n$/);
  });
});
