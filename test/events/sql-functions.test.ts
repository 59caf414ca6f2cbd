import { createHash, randomBytes } from 'node:crypto';
import { cp, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { drizzle } from 'drizzle-orm/postgres-js';
import { migrate } from 'drizzle-orm/postgres-js/migrator';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { applyFunctionFiles, dependencyOrder, type FunctionFile } from '../../src/db/functions.js';
import { applyMigrations, FUNCTIONS_FOLDER, MIGRATIONS_FOLDER } from '../../src/db/migrate.js';
import { createLogger } from '../../src/logger.js';
import { RELEASE } from '../../src/release.js';
import { createTestDatabase, type TestDatabase, withDatabase } from '../support/database.js';

/**
 * migrations/functions/<name>.sql is the only definition of each database function: the broker
 * applies a file again after the versioned migrations whenever its text changed. A migrated
 * database must hold exactly what the files define (signature, volatility, SET clauses and body),
 * and no versioned migration may define a function again.
 */

/** The last versioned migration that defined functions, before the function files became their only copy. */
const LAST_MIGRATION_WITH_FUNCTIONS = 15;
const SCRATCH = 'omb_function_file_scratch';

let database: TestDatabase;
beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(() => database.drop());

async function files(folder = FUNCTIONS_FOLDER): Promise<{ name: string; file: string; text: string }[]> {
  const names = (await readdir(folder)).filter((file) => file.endsWith('.sql')).sort();
  return Promise.all(
    names.map(async (file) => ({ name: path.basename(file, '.sql'), file, text: await readFile(path.join(folder, file), 'utf8') })),
  );
}

interface Defined {
  name: string;
  definition: string;
}

/**
 * What `text` defines, as `pg_get_functiondef` prints it, beside what the database's public
 * schema holds under the same names: the text runs in a scratch schema, first on the search
 * path, inside a transaction that is rolled back.
 */
async function defineInScratch(sql: postgres.Sql, text: string): Promise<{ defined: Defined[]; public: Map<string, string> }> {
  const connection = await sql.reserve();
  try {
    await connection`begin`;
    await connection.unsafe(`create schema ${SCRATCH}`);
    await connection.unsafe(`set local search_path = ${SCRATCH}, public`);
    await connection.unsafe(text);
    const defined = await connection<Defined[]>`
      select p.proname as name, pg_get_functiondef(p.oid) as definition
        from pg_proc p join pg_namespace n on n.oid = p.pronamespace
       where n.nspname = ${SCRATCH} order by p.proname`;
    const inPublic = await connection<Defined[]>`
      select p.proname as name, pg_get_functiondef(p.oid) as definition
        from pg_proc p join pg_namespace n on n.oid = p.pronamespace
       where n.nspname = 'public' and p.proname = any(${defined.map((d) => d.name)}::text[])`;
    return {
      defined: defined.map((d) => ({ name: d.name, definition: d.definition.replace(`FUNCTION ${SCRATCH}.`, 'FUNCTION public.') })),
      public: new Map(inPublic.map((d) => [d.name, d.definition])),
    };
  } finally {
    await connection`rollback`;
    connection.release();
  }
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/** The ledger, each `appliedAt` in seconds since the epoch. */
async function ledger(sql: postgres.Sql): Promise<Map<string, { sha256: string; appliedAt: number }>> {
  const rows = await sql<{ name: string; sha256: string; appliedAt: number }[]>`
    select function_name as name, sha256, extract(epoch from applied_at)::float8 as "appliedAt" from applied_functions`;
  return new Map(rows.map((row) => [row.name, { sha256: row.sha256, appliedAt: row.appliedAt }]));
}

describe('the function files', () => {
  it('each define exactly one function, named as the file, and the database holds exactly that definition', async () => {
    const all = await files();
    expect(all.length).toBeGreaterThan(0);
    for (const { name, file, text } of all) {
      const { defined, public: inPublic } = await defineInScratch(database.sql, text);
      expect(
        defined.map((d) => d.name),
        `${file} defines one function, ${name}`,
      ).toEqual([name]);
      expect(inPublic.get(name), `the definition of ${name} in the database`).toBe(defined[0]!.definition);
    }
  });

  it('are compared on the whole definition: a changed volatility or SET clause does not pass', async () => {
    const readQueue = (await files()).find((f) => f.name === 'omb_read_queue')!;
    expect(readQueue.text).toContain('STABLE SET plan_cache_mode = force_generic_plan');
    for (const changed of [
      readQueue.text.replace('STABLE SET', 'VOLATILE SET'),
      readQueue.text.replace(' SET plan_cache_mode = force_generic_plan', ''),
    ]) {
      const { defined, public: inPublic } = await defineInScratch(database.sql, changed);
      expect(defined[0]!.definition).not.toBe(inPublic.get('omb_read_queue'));
    }
  });

  it('cover every omb_ function in the database, one file each and no overloads left behind', async () => {
    const names = new Set((await files()).map((f) => f.name));
    const rows = await database.sql<{ name: string; n: number }[]>`
      select p.proname as name, count(*)::int as n from pg_proc p join pg_namespace n on n.oid = p.pronamespace
       where n.nspname = 'public' and p.proname like 'omb\\_%' group by p.proname order by p.proname`;
    expect(rows.map((r) => r.name)).toEqual([...names].sort());
    expect(rows.filter((r) => r.n !== 1)).toEqual([]);
  });

  it('are the only place functions are defined: no migration after 0015 defines one', async () => {
    const later = (await readdir(MIGRATIONS_FOLDER)).filter(
      (file) => /^\d{4}_.*\.sql$/.test(file) && Number(file.slice(0, 4)) > LAST_MIGRATION_WITH_FUNCTIONS,
    );
    expect(later.length).toBeGreaterThan(0);
    for (const file of later) {
      const text = await readFile(path.join(MIGRATIONS_FOLDER, file), 'utf8');
      expect(text, `${file} defines no function`).not.toMatch(/create\s+(or\s+replace\s+)?function/i);
    }
  });

  it('are recorded in the ledger with the hash of their text and the release that applied them', async () => {
    const recorded = await ledger(database.sql);
    const all = await files();
    expect([...recorded.keys()].sort()).toEqual(all.map((f) => f.name));
    for (const { name, text } of all) expect(recorded.get(name)?.sha256, name).toBe(sha256(text));
    const releases = await database.sql<{ release: string | null }[]>`select distinct release from applied_functions`;
    expect(releases.map((row) => row.release)).toEqual([RELEASE]);
  });
});

describe('the order function files are applied in', () => {
  const file = (name: string, text: string): FunctionFile => ({ name, path: `${name}.sql`, text, sha256: sha256(text) });

  it('puts each file after the functions it calls, whatever its comments name', async () => {
    const order = dependencyOrder((await files()).map(({ name, text }) => file(name, text))).map((f) => f.name);
    const comesBefore = (a: string, b: string) => expect(order.indexOf(a), `${a} before ${b}`).toBeLessThan(order.indexOf(b));
    comesBefore('omb_append_events', 'omb_append_event');
    comesBefore('omb_append_events_sealed', 'omb_append_events');
    comesBefore('omb_events_seen', 'omb_ingest_account_expiry');
    comesBefore('omb_event_partition_bounds', 'omb_event_partitions_ensure');
    comesBefore('omb_ingest_trigger_alone_sealed', 'omb_ingest_trigger_batch_sealed');
    comesBefore('omb_ingest_trigger_alone_sealed', 'omb_ingest_trigger_alone');
    comesBefore('omb_ingest_trigger_batch_sealed', 'omb_ingest_trigger_batch');
    comesBefore('omb_paid_plans', 'omb_ingest_trigger_alone_sealed');
  });

  it('refuses a cycle, naming it', () => {
    const a = file('omb_a', 'CREATE FUNCTION omb_a() RETURNS int LANGUAGE sql AS $$ SELECT omb_b() $$;');
    const b = file('omb_b', '-- not omb_c\nCREATE FUNCTION omb_b() RETURNS int LANGUAGE sql AS $$ SELECT omb_a() $$;');
    const c = file('omb_c', 'CREATE FUNCTION omb_c() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$;');
    expect(dependencyOrder([c, b]).map((f) => f.name)).toEqual(['omb_c', 'omb_b']);
    expect(() => dependencyOrder([a, b, c])).toThrow('cycle (omb_a → omb_b → omb_a)');
  });
});

describe('applying the function files', () => {
  let fresh: TestDatabase;
  let folder: string;
  beforeAll(async () => {
    fresh = await createTestDatabase();
    folder = await mkdtemp(path.join(tmpdir(), 'omb-functions-'));
    await cp(FUNCTIONS_FOLDER, folder, { recursive: true });
  });
  afterAll(async () => {
    await fresh?.drop();
    if (folder) await rm(folder, { recursive: true, force: true });
  });

  it('applies nothing again when no file changed', async () => {
    const before = await ledger(fresh.sql);
    await applyMigrations(fresh.url, createLogger('silent'));
    expect(await ledger(fresh.sql)).toEqual(before);
  });

  it('applies again on the next run exactly the file whose text is not the one recorded', async () => {
    await fresh.sql`update applied_functions set sha256 = 'stale' where function_name = 'omb_paid_plans'`;
    const before = await ledger(fresh.sql);
    await applyMigrations(fresh.url, createLogger('silent'));
    const after = await ledger(fresh.sql);
    for (const [name, row] of after) {
      if (name === 'omb_paid_plans') {
        expect(row.appliedAt).toBeGreaterThan(before.get(name)!.appliedAt);
        expect(row.sha256).toBe(sha256(await readFile(path.join(FUNCTIONS_FOLDER, `${name}.sql`), 'utf8')));
      } else {
        expect(row, name).toEqual(before.get(name));
      }
    }
  });

  it('upgrades a database migrated through 0015 in place: the ledger is added and every file applied once', async () => {
    const name = `omb_functions_${randomBytes(6).toString('hex')}`;
    const adminUrl = inject('pgAdminUrl');
    const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
    const versioned = await mkdtemp(path.join(tmpdir(), 'omb-through-0015-'));
    try {
      await admin.unsafe(`create database ${name}`);
      await cp(MIGRATIONS_FOLDER, versioned, { recursive: true });
      const journalPath = path.join(versioned, 'meta', '_journal.json');
      const journal = JSON.parse(await readFile(journalPath, 'utf8')) as { entries: Array<{ idx: number }> };
      journal.entries = journal.entries.filter((entry) => entry.idx <= LAST_MIGRATION_WITH_FUNCTIONS);
      await writeFile(journalPath, JSON.stringify(journal));
      const url = withDatabase(adminUrl, name);
      const sql = postgres(url, { max: 1, onnotice: () => {} });
      try {
        await migrate(drizzle(sql), { migrationsFolder: versioned });
        expect((await sql`select to_regclass('applied_functions') as t`)[0]!.t).toBeNull();
        await applyMigrations(url, createLogger('silent'));
        const all = await files();
        const recorded = await ledger(sql);
        expect([...recorded.keys()].sort()).toEqual(all.map((f) => f.name));
        for (const { name, text } of all) expect(recorded.get(name)!.sha256).toBe(sha256(text));
      } finally {
        await sql.end();
      }
    } finally {
      await admin.unsafe(`drop database if exists ${name} with (force)`);
      await admin.end();
      await rm(versioned, { recursive: true, force: true });
    }
  });

  it('puts a changed definition in the database and records its hash', async () => {
    const changedPath = path.join(folder, 'omb_paid_plans.sql');
    const changed = (await readFile(changedPath, 'utf8')).replace('GROUP BY g.holder_installation_id', 'GROUP BY 1');
    await writeFile(changedPath, changed);
    expect(await applyFunctionFiles(fresh.sql, folder)).toEqual(['omb_paid_plans']);
    const [row] = await fresh.sql<{ source: string }[]>`select prosrc as source from pg_proc where proname = 'omb_paid_plans'`;
    expect(row!.source).toContain('GROUP BY 1');
    expect((await ledger(fresh.sql)).get('omb_paid_plans')!.sha256).toBe(sha256(changed));
    expect(await applyFunctionFiles(fresh.sql, folder)).toEqual([]);
  });

  it('names the file that fails and leaves the database and the ledger as they were', async () => {
    const before = await ledger(fresh.sql);
    const paidPlans = path.join(folder, 'omb_paid_plans.sql');
    await writeFile(paidPlans, (await readFile(paidPlans, 'utf8')).replace('GROUP BY 1', 'GROUP BY g.holder_installation_id'));
    const readQueue = path.join(folder, 'omb_read_queue.sql');
    await writeFile(readQueue, (await readFile(readQueue, 'utf8')).replace('FROM events e', 'FROM no_such_table e'));
    await expect(applyFunctionFiles(fresh.sql, folder)).rejects.toThrow(/omb_read_queue\.sql could not be applied: .*no_such_table/);
    expect(await ledger(fresh.sql)).toEqual(before);
    const [row] = await fresh.sql<{ source: string }[]>`select prosrc as source from pg_proc where proname = 'omb_paid_plans'`;
    expect(row!.source).toContain('GROUP BY 1');
  });

  it('forgets a function whose file was removed', async () => {
    await fresh.sql`insert into applied_functions (function_name, sha256) values ('omb_removed', 'old')`;
    expect(await applyFunctionFiles(fresh.sql, FUNCTIONS_FOLDER)).toEqual(['omb_paid_plans']);
    expect([...(await ledger(fresh.sql)).keys()]).not.toContain('omb_removed');
  });

  it('refuses a file that does not define the function it is named after', async () => {
    const other = path.join(folder, 'omb_other.sql');
    await writeFile(
      other,
      (await readFile(path.join(folder, 'omb_paid_plans.sql'), 'utf8')).replace('FUNCTION omb_paid_plans', 'FUNCTION omb_plans'),
    );
    await expect(applyFunctionFiles(fresh.sql, folder)).rejects.toThrow(
      /omb_other\.sql must define exactly one function, omb_other; it defines omb_plans/,
    );
    await rm(other);
  });
});
