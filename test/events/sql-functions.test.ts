import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MIGRATIONS_FOLDER } from '../../src/db/database.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

/**
 * migrations/functions/<name>.sql holds the current body of each database function, so nobody
 * reads every migration to learn what runs. A changed file needs a migration that applies it;
 * until one does, the database holds another body and this fails.
 */
const FUNCTIONS_FOLDER = path.join(MIGRATIONS_FOLDER, 'functions');

let database: TestDatabase;
beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(() => database.drop());

async function functionFiles(): Promise<{ name: string; body: string }[]> {
  const files = (await readdir(FUNCTIONS_FOLDER)).filter((file) => file.endsWith('.sql')).sort();
  return Promise.all(
    files.map(async (file) => {
      const text = await readFile(path.join(FUNCTIONS_FOLDER, file), 'utf8');
      const start = text.indexOf('$$');
      const end = text.lastIndexOf('$$');
      expect(start, `${file} has a $$-quoted body`).toBeGreaterThanOrEqual(0);
      expect(end).toBeGreaterThan(start);
      return { name: path.basename(file, '.sql'), body: text.slice(start + 2, end) };
    }),
  );
}

describe('database functions', () => {
  it('hold exactly the bodies in migrations/functions', async () => {
    const files = await functionFiles();
    expect(files.length).toBeGreaterThan(0);
    for (const { name, body } of files) {
      const rows = await database.sql<{ prosrc: string }[]>`
        select p.prosrc from pg_proc p join pg_namespace n on n.oid = p.pronamespace
         where n.nspname = 'public' and p.proname = ${name}`;
      expect(rows, `one function named ${name}`).toHaveLength(1);
      expect(rows[0]!.prosrc, `the body of ${name}`).toBe(body);
    }
  });

  it('are all kept in migrations/functions', async () => {
    const files = new Set((await functionFiles()).map((f) => f.name));
    const rows = await database.sql<{ proname: string }[]>`
      select p.proname from pg_proc p join pg_namespace n on n.oid = p.pronamespace
       where n.nspname = 'public' and p.proname like 'omb\\_%'`;
    expect(rows.map((r) => r.proname).filter((name) => !files.has(name))).toEqual([]);
  });
});
