import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cp, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import { drizzle } from 'drizzle-orm/postgres-js';
import { migrate } from 'drizzle-orm/postgres-js/migrator';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { withoutComments } from '../../src/db/functions.js';
import { applyMigrations, FUNCTIONS_FOLDER, MIGRATIONS_FOLDER, MigrationError } from '../../src/db/migrate.js';
import { createLogger } from '../../src/logger.js';
import { RELEASE } from '../../src/release.js';
import { createTestDatabase, type TestDatabase, withDatabase } from '../support/database.js';
import { previousRelease, REPO_ROOT } from '../support/releases.js';

/**
 * docs/migrations.md, enforced: the migrations HEAD adds since the previous release remove or
 * change nothing that release's processes still use (they serve beside HEAD during a deploy), and
 * hold no lock on a hot table for more than a moment; an older broker started on HEAD's database
 * puts back none of its older function bodies; and a migration that cannot get its lock waits
 * `lock_timeout`, retries, and at last gives up having changed nothing.
 */

/** The tables every ingest and queue read touches: a migration holds no lock on them for long. */
const HOT_TABLE = /^(events|events_p\d{8}|events_default|installations|triggers)$/;
/** Marks a statement as a contract step (docs/migrations.md): `-- contract: <what>, unused since <release>`. */
const CONTRACT_MARKER = /^\s*--\s*contract:/im;

interface Journal {
  entries: Array<{ idx: number; version: string; when: number; tag: string; breakpoints: boolean }>;
}

/** The previous release's tree (`src/`, `migrations/`), from `git archive`. */
let previous: { version: string; commit: string; folder: string };
/** The previous release's code and function files, without comments: what its processes name. */
let previousCode: Array<{ file: string; code: string }>;
/** The functions the contract steps of the migrations since the previous release drop. */
const droppedSincePrevious = new Set<string>();
/**
 * The columns whose NOT NULL the migrations since the previous release drop, each marked
 * `-- loosens: <table>.<column>, <why the previous release never reads a null there>`
 * (docs/migrations.md): `table.column`.
 */
const loosenedSincePrevious = new Set<string>();

beforeAll(async () => {
  const release = await previousRelease();
  const folder = await mkdtemp(path.join(tmpdir(), 'omb-previous-release-'));
  execFileSync('sh', ['-c', `git archive ${release.commit} src migrations | tar -x -C '${folder}'`], { cwd: REPO_ROOT });
  previous = { ...release, folder };
  const files = await readdir(path.join(folder, 'src'), { recursive: true });
  const ts = files.filter((file) => file.endsWith('.ts') && !file.endsWith('.test.ts')).map((file) => path.join('src', file));
  const functions = (await readdir(path.join(folder, 'migrations/functions'))).map((file) => path.join('migrations/functions', file));
  const newest = Math.max(...(await readJournal(path.join(folder, 'migrations'))).entries.map((entry) => entry.when));
  const added = (await readJournal(MIGRATIONS_FOLDER)).entries.filter((entry) => entry.when > newest);
  for (const entry of added) {
    const text = await readFile(path.join(MIGRATIONS_FOLDER, `${entry.tag}.sql`), 'utf8');
    for (const name of contractDrops(text)) droppedSincePrevious.add(name);
    for (const [, column] of text.matchAll(/^\s*--\s*loosens:\s*([\w$]+\.[\w$]+),/gm)) loosenedSincePrevious.add(column!);
  }
  previousCode = await Promise.all([
    ...ts.map(async (file) => ({ file, code: withoutTsComments(await readFile(path.join(folder, file), 'utf8')) })),
    ...functions.map(async (file) => ({ file, code: withoutComments(await readFile(path.join(folder, file), 'utf8')) })),
  ]);
});
afterAll(async () => {
  if (previous?.folder) await rm(previous.folder, { recursive: true, force: true });
});

/** TypeScript without its comments; strings and template literals (which hold SQL) are kept. */
function withoutTsComments(code: string): string {
  return code.replace(/'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*"|`(?:\\.|[^`\\])*`|\/\/[^\n]*|\/\*[\s\S]*?\*\//g, (token) =>
    token.startsWith('//') || token.startsWith('/*') ? ' ' : token,
  );
}

/**
 * The previous release's files that name `name` (a table, column or function), leaving out
 * `except` and the files of the functions contract steps since then drop (`dropped`): a function
 * that only dead functions call is dead too, and may go with them. Each of those is checked in its
 * own right, so one still in use is refused for itself.
 */
function namedByPrevious(name: string, except?: string, dropped: ReadonlySet<string> = droppedSincePrevious): string[] {
  const word = new RegExp(`(?<![\\w$])${name.replace(/[$]/g, '\\$')}(?![\\w$])`, 'i');
  const dead = new Set([...dropped].map((fn) => `migrations/functions/${fn}.sql`));
  return previousCode.filter(({ file, code }) => file !== except && !dead.has(file) && word.test(code)).map(({ file }) => file);
}

/** The functions a contract step in `text` drops. */
function contractDrops(text: string): string[] {
  return text
    .split('--> statement-breakpoint')
    .filter((chunk) => CONTRACT_MARKER.test(chunk))
    .flatMap((chunk) => [...withoutComments(chunk).matchAll(/\bDROP\s+FUNCTION\s+(?:IF\s+EXISTS\s+)?([\w$."]+)/gi)])
    .map((m) => unquote(m[1]!));
}

const unquote = (name: string) => name.replace(/"/g, '').split('.').pop()!;

/** The clauses of `ADD COLUMN`s in a statement, each up to its comma at the top level. */
function addedColumns(statement: string): string[] {
  const clauses: string[] = [];
  for (const match of statement.matchAll(/\bADD\s+COLUMN\b/gi)) {
    let depth = 0;
    let end = match.index + match[0].length;
    for (; end < statement.length; end++) {
      const ch = statement[end];
      if (ch === '(') depth++;
      else if (ch === ')') depth--;
      else if ((ch === ',' || ch === ';') && depth === 0) break;
    }
    clauses.push(statement.slice(match.index, end));
  }
  return clauses;
}

/**
 * What in one migration breaks the policy. A contract step (marked) may drop, rename, retype or
 * tighten only what the previous release's code and function files no longer name; nothing
 * excuses a column added NOT NULL without a default (the previous release's inserts would fail)
 * or a long lock on a hot table.
 */
function policyViolations(tag: string, text: string): string[] {
  const found: string[] = [];
  for (const chunk of text.split('--> statement-breakpoint')) {
    const statement = withoutComments(chunk).replace(/\s+/g, ' ').trim();
    if (!statement) continue;
    const contract = CONTRACT_MARKER.test(chunk);
    const at = `${tag}: ${statement.slice(0, 100)}`;
    // What this statement removes or changes, by name, for the previous release's processes.
    const changes: Array<{ rule: string; name: string; except?: string }> = [];
    for (const m of statement.matchAll(/\bDROP\s+FUNCTION\s+(?:IF\s+EXISTS\s+)?([\w$."]+)/gi)) {
      const name = unquote(m[1]!);
      changes.push({ rule: 'DROP FUNCTION', name, except: `migrations/functions/${name}.sql` });
    }
    for (const m of statement.matchAll(/\bDROP\s+TABLE\s+(?:IF\s+EXISTS\s+)?([\w$."]+)/gi))
      changes.push({ rule: 'DROP TABLE', name: unquote(m[1]!) });
    for (const m of statement.matchAll(/\bDROP\s+COLUMN\s+(?:IF\s+EXISTS\s+)?([\w$"]+)/gi))
      changes.push({ rule: 'DROP COLUMN', name: unquote(m[1]!) });
    for (const m of statement.matchAll(/\bRENAME\s+(?:COLUMN\s+|CONSTRAINT\s+)?([\w$"]+)\s+TO\b/gi))
      changes.push({ rule: 'RENAME', name: unquote(m[1]!) });
    for (const m of statement.matchAll(/\b(?:ALTER|DROP)\s+TABLE\s+(?:IF\s+EXISTS\s+)?(?:ONLY\s+)?([\w$."]+)\s+RENAME\s+TO\b/gi))
      changes.push({ rule: 'RENAME', name: unquote(m[1]!) });
    for (const m of statement.matchAll(/\bALTER\s+(?:FUNCTION|VIEW|INDEX|SEQUENCE)\s+([\w$."]+).*?\bRENAME\s+TO\b/gi))
      changes.push({ rule: 'RENAME', name: unquote(m[1]!) });
    for (const m of statement.matchAll(/\bALTER\s+COLUMN\s+([\w$"]+)\s+(?:SET\s+DATA\s+)?TYPE\b/gi))
      changes.push({ rule: 'ALTER COLUMN … TYPE', name: unquote(m[1]!) });
    for (const m of statement.matchAll(/\bALTER\s+COLUMN\s+([\w$"]+)\s+SET\s+NOT\s+NULL\b/gi))
      changes.push({ rule: 'SET NOT NULL', name: unquote(m[1]!) });
    for (const change of changes) {
      if (!contract) {
        found.push(`${at}: ${change.rule} outside a contract step`);
        continue;
      }
      const users = namedByPrevious(change.name, change.except, new Set([...droppedSincePrevious, ...contractDrops(text)]));
      if (users.length > 0)
        found.push(`${at}: ${change.rule} of ${change.name}, which ${previous.version} still names (${users.slice(0, 3).join(', ')})`);
    }
    for (const clause of addedColumns(statement)) {
      if (/\bNOT\s+NULL\b/i.test(clause) && !/\bDEFAULT\b/i.test(clause))
        found.push(`${at}: ADD COLUMN … NOT NULL without a DEFAULT: the previous release's inserts would fail`);
    }
    const hot = (table: string) => HOT_TABLE.test(unquote(table));
    for (const m of statement.matchAll(/\bCREATE\s+(?:UNIQUE\s+)?INDEX\s+(CONCURRENTLY\s+)?.*?\bON\s+(?:ONLY\s+)?([\w$."]+)/gi)) {
      if (hot(m[2]!))
        found.push(
          m[1]
            ? `${at}: CREATE INDEX CONCURRENTLY cannot run in a migration's transaction; build it under the broker's job`
            : `${at}: CREATE INDEX on hot table ${unquote(m[2]!)} locks it for the whole build; build it CONCURRENTLY under the broker's job`,
        );
    }
    for (const m of statement.matchAll(/\b(?:UPDATE\s+(?:ONLY\s+)?([\w$."]+)\s+SET|DELETE\s+FROM\s+(?:ONLY\s+)?([\w$."]+))/gi)) {
      const table = m[1] ?? m[2]!;
      if (hot(table)) found.push(`${at}: UPDATE/DELETE on hot table ${unquote(table)}; backfill in bounded batches under the broker's job`);
    }
    for (const m of statement.matchAll(/\bALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?(?:ONLY\s+)?([\w$."]+)(.*)$/gi)) {
      if (!hot(m[1]!)) continue;
      if (/\bADD\s+CONSTRAINT\b/i.test(m[2]!) && !/\bNOT\s+VALID\b/i.test(m[2]!))
        found.push(`${at}: ADD CONSTRAINT on hot table ${unquote(m[1]!)} checks every row under its lock; add it NOT VALID`);
      if (/\bDEFAULT\s+[^,]*\b(gen_random_uuid|random|clock_timestamp|uuid_generate_\w+)\s*\(/i.test(m[2]!))
        found.push(`${at}: a volatile DEFAULT rewrites hot table ${unquote(m[1]!)} under its lock`);
    }
  }
  return found;
}

async function readJournal(folder: string): Promise<Journal> {
  return JSON.parse(await readFile(path.join(folder, 'meta', '_journal.json'), 'utf8')) as Journal;
}

describe('the migrations since the previous release', () => {
  it('are all expand steps, or contract steps dropping only what the previous release no longer names', async () => {
    const before = await readJournal(path.join(previous.folder, 'migrations'));
    const head = await readJournal(MIGRATIONS_FOLDER);
    const newest = Math.max(...before.entries.map((entry) => entry.when));
    // The previous release's migrations are HEAD's first ones, unchanged.
    expect(head.entries.slice(0, before.entries.length).map((e) => [e.tag, e.when])).toEqual(before.entries.map((e) => [e.tag, e.when]));
    for (const entry of before.entries) {
      const [was, is] = await Promise.all(
        [path.join(previous.folder, 'migrations'), MIGRATIONS_FOLDER].map((folder) =>
          readFile(path.join(folder, `${entry.tag}.sql`), 'utf8'),
        ),
      );
      expect(is, `${entry.tag}.sql, released in ${previous.version}, is unchanged`).toBe(was);
    }
    const added = head.entries.filter((entry) => entry.when > newest);
    const violations: string[] = [];
    for (const entry of added)
      violations.push(...policyViolations(entry.tag, await readFile(path.join(MIGRATIONS_FOLDER, `${entry.tag}.sql`), 'utf8')));
    expect(violations).toEqual([]);
  });

  it('are checked by a rule that refuses what would break the previous release', () => {
    const refused = (text: string) => policyViolations('0099_example', text);
    expect(refused('ALTER TABLE "triggers" ADD COLUMN "note" text;')).toEqual([]);
    expect(refused('ALTER TABLE "triggers" ADD COLUMN "note" numeric(10, 2) DEFAULT 0 NOT NULL;')).toEqual([]);
    expect(refused('CREATE TABLE "notes" ("id" integer);\n--> statement-breakpoint\nCREATE INDEX "notes_id" ON "notes" ("id");')).toEqual(
      [],
    );
    expect(refused('ALTER TABLE "triggers" ADD COLUMN "note" text NOT NULL;')).toEqual([expect.stringContaining('without a DEFAULT')]);
    expect(refused('ALTER TABLE "triggers" DROP COLUMN "composio_disabled_reason";')).toEqual([
      expect.stringContaining('DROP COLUMN outside a contract step'),
    ]);
    expect(refused('-- contract: unused since 0.1.0\nALTER TABLE "triggers" DROP COLUMN "composio_disabled_reason";')).toEqual([
      expect.stringMatching(/DROP COLUMN of composio_disabled_reason, which \d+\.\d+\.\d+ still names \(.*src\/db\/schema\.ts/),
    ]);
    expect(refused('-- contract: unused since 0.1.0\nALTER TABLE "triggers" DROP COLUMN "a_column_never_named";')).toEqual([]);
    expect(refused('-- contract: x\nDROP FUNCTION omb_read_queue(bigint);')).toEqual([expect.stringContaining('which')]);
    expect(refused('DROP FUNCTION IF EXISTS omb_never_named(int);')).toEqual([expect.stringContaining('outside a contract step')]);
    // Named by the previous release only in the file of a function dropped with it: dead too.
    expect(refused('-- contract: x\nDROP FUNCTION omb_event_seen(uuid, text, timestamptz);')).toEqual([]);
    // Named in a live function's file: in use, whatever else is dropped beside it.
    expect(refused('-- contract: x\nDROP FUNCTION omb_events_seen(uuid[], text[], timestamptz[]);')).toEqual([
      expect.stringMatching(/omb_events_seen, which \d+\.\d+\.\d+ still names \(.*migrations\/functions\/omb_ingest_trigger/),
    ]);
    expect(refused('ALTER TABLE "installations" RENAME COLUMN "token_hash" TO "token_digest";')).toHaveLength(1);
    expect(refused('ALTER TABLE "events" ALTER COLUMN "payload" SET DATA TYPE json;')).toHaveLength(1);
    expect(refused('ALTER TABLE "triggers" ALTER COLUMN "composio_disabled_reason" SET NOT NULL;')).toHaveLength(1);
    expect(refused('CREATE INDEX "events_x" ON "events" USING btree ("received_at");')).toEqual([
      expect.stringContaining('CREATE INDEX on hot table events'),
    ]);
    expect(refused('CREATE INDEX CONCURRENTLY "t_x" ON "triggers" ("status");')).toEqual([
      expect.stringContaining('CONCURRENTLY cannot run'),
    ]);
    expect(refused('-- contract: x\nUPDATE "installations" SET "plan" = \'free\';')).toEqual([
      expect.stringContaining('UPDATE/DELETE on hot table installations'),
    ]);
    expect(refused('DELETE FROM events_p20261201 WHERE true;')).toHaveLength(1);
    expect(refused('ALTER TABLE "triggers" ADD CONSTRAINT "c" CHECK (status <> \'\');')).toHaveLength(1);
    expect(refused('ALTER TABLE "triggers" ADD CONSTRAINT "c" CHECK (status <> \'\') NOT VALID;')).toEqual([]);
  });
});

interface Shape {
  functions: Map<string, string>;
  columns: Map<string, string>;
}

/** Each `omb_*` function's signature and attributes (not its body), and each column, as the processes see them. */
async function shapeOf(sql: postgres.Sql): Promise<Shape> {
  const functions = await sql<{ key: string; shape: string }[]>`
    select p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')' as key,
           concat_ws(' ', 'returns', pg_get_function_result(p.oid), 'kind', p.prokind, 'volatility', p.provolatile,
             'strict', p.proisstrict, 'security definer', p.prosecdef, 'parallel', p.proparallel,
             'set', coalesce(array_to_string(p.proconfig, ', '), '-')) as shape
      from pg_proc p join pg_namespace n on n.oid = p.pronamespace
     where n.nspname = 'public' and p.proname like 'omb\\_%'`;
  const columns = await sql<{ key: string; shape: string }[]>`
    select n.nspname || '.' || c.relname || '.' || a.attname as key,
           concat_ws(' ', format_type(a.atttypid, a.atttypmod), case when a.attnotnull then 'not null' else 'null' end,
             'default', coalesce(pg_get_expr(d.adbin, d.adrelid), '-')) as shape
      from pg_attribute a
      join pg_class c on c.oid = a.attrelid
      join pg_namespace n on n.oid = c.relnamespace
      left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
     where c.relkind in ('r', 'p') and not c.relispartition and a.attnum > 0 and not a.attisdropped
       and n.nspname not in ('pg_catalog', 'information_schema', 'drizzle') and n.nspname not like 'pg\\_%'`;
  return {
    functions: new Map(functions.map((row) => [row.key, row.shape])),
    columns: new Map(columns.map((row) => [row.key, row.shape])),
  };
}

/** What the previous release's processes use that `after` lost or changed. */
function brokenFor(before: Shape, after: Shape): string[] {
  const broken: string[] = [];
  for (const [key, shape] of before.functions) {
    const name = key.slice(0, key.indexOf('('));
    if (namedByPrevious(name, `migrations/functions/${name}.sql`).length === 0) continue;
    if (!after.functions.has(key)) broken.push(`function ${key} is gone`);
    else if (after.functions.get(key) !== shape) broken.push(`function ${key}: ${shape} became ${after.functions.get(key)}`);
  }
  for (const [key, shape] of before.columns) {
    const [, table, column] = key.split('.') as [string, string, string];
    if (namedByPrevious(table).length === 0 || namedByPrevious(column).length === 0) continue;
    const now = after.columns.get(key);
    if (now === undefined) broken.push(`column ${key} is gone`);
    else if (now !== shape && !(loosenedSincePrevious.has(`${table}.${column}`) && now === loosened(shape)))
      broken.push(`column ${key}: ${shape} became ${now}`);
  }
  return broken;
}

/** A column's shape (see shapeOf) with its NOT NULL dropped, and nothing else changed. */
function loosened(shape: string): string {
  return shape.replace(/ not null /, ' null ');
}

async function createDatabase(template?: string): Promise<{ name: string; url: string; drop(): Promise<void> }> {
  const adminUrl = inject('pgAdminUrl');
  const name = `omb_policy_${randomBytes(6).toString('hex')}`;
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`create database ${name}${template ? ` template ${template}` : ''}`);
  } finally {
    await admin.end();
  }
  return {
    name,
    url: withDatabase(adminUrl, name),
    async drop() {
      const cleanup = postgres(adminUrl, { max: 1, onnotice: () => {} });
      try {
        await cleanup.unsafe(`drop database if exists ${name} with (force)`);
      } finally {
        await cleanup.end();
      }
    },
  };
}

/** A copy of HEAD's migrations folder with `sql` added as the newest migration `tag`. */
async function foldersWith(tag: string, sql: string): Promise<string> {
  const folder = await mkdtemp(path.join(tmpdir(), 'omb-policy-migrations-'));
  await cp(MIGRATIONS_FOLDER, folder, { recursive: true });
  const journal = await readJournal(folder);
  const last = journal.entries.at(-1)!;
  journal.entries.push({ ...last, idx: last.idx + 1, when: last.when + 1000, tag });
  await writeFile(path.join(folder, 'meta', '_journal.json'), JSON.stringify(journal));
  await writeFile(path.join(folder, `${tag}.sql`), sql);
  return folder;
}

describe('a database the previous release left, migrated by HEAD', () => {
  let before: { name: string; url: string; drop(): Promise<void> };
  let shape: Shape;
  const scratch: string[] = [];

  beforeAll(async () => {
    // As the previous release's broker leaves it: its migrations, then its own runner's function files.
    before = await createDatabase();
    const sql = postgres(before.url, { max: 1, onnotice: () => {} });
    try {
      await migrate(drizzle(sql), { migrationsFolder: path.join(previous.folder, 'migrations') });
      const runner = (await import(pathToFileURL(path.join(previous.folder, 'src/db/functions.ts')).href)) as {
        applyFunctionFiles(sql: postgres.Sql, folder: string): Promise<string[]>;
      };
      expect((await runner.applyFunctionFiles(sql, path.join(previous.folder, 'migrations/functions'))).length).toBeGreaterThan(0);
      shape = await shapeOf(sql);
    } finally {
      await sql.end();
    }
  });
  afterAll(async () => {
    await before?.drop();
    for (const folder of scratch) await rm(folder, { recursive: true, force: true });
  });

  /** A copy of the previous release's database. */
  const copy = () => createDatabase(before.name);

  it('keeps every function and column the previous release uses, with the same signature and type', async () => {
    expect(shape.functions.size).toBeGreaterThan(10);
    expect(shape.columns.size).toBeGreaterThan(50);
    const db = await copy();
    try {
      await applyMigrations(db.url, createLogger('silent'));
      const sql = postgres(db.url, { max: 1, onnotice: () => {} });
      try {
        expect(brokenFor(shape, await shapeOf(sql))).toEqual([]);
      } finally {
        await sql.end();
      }
    } finally {
      await db.drop();
    }
  });

  it('would see a changed volatility or a retyped column', async () => {
    const folder = await foldersWith(
      '0099_breaks_the_previous_release',
      'ALTER TABLE "trigger_orphans" ALTER COLUMN "first_seen_at" SET DATA TYPE timestamp;',
    );
    scratch.push(folder);
    const readQueue = path.join(folder, 'functions', 'omb_read_queue.sql');
    await writeFile(readQueue, (await readFile(readQueue, 'utf8')).replace('STABLE SET', 'VOLATILE SET'));
    const db = await copy();
    try {
      await applyMigrations(db.url, createLogger('silent'), { migrationsFolder: folder });
      const sql = postgres(db.url, { max: 1, onnotice: () => {} });
      try {
        const broken = brokenFor(shape, await shapeOf(sql));
        expect(broken).toEqual([
          expect.stringMatching(/^function omb_read_queue\(.*volatility s .* became .*volatility v /),
          expect.stringMatching(/^column public\.trigger_orphans\.first_seen_at: timestamp with time zone .* became timestamp without/),
        ]);
      } finally {
        await sql.end();
      }
    } finally {
      await db.drop();
    }
  });
});

type LedgerRow = { name: string; sha256: string; release: string | null; appliedAt: string };

async function ledger(sql: postgres.Sql): Promise<LedgerRow[]> {
  return sql<LedgerRow[]>`
    select function_name as name, sha256, release, applied_at::text as "appliedAt" from applied_functions order by function_name`;
}

/** A logger whose warnings the test reads. */
function recordingLogger(): { logger: ReturnType<typeof createLogger>; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const logger = createLogger('warn', { write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>) });
  return { logger, lines };
}

describe('an older release started on a newer database', () => {
  let database: TestDatabase;
  let older: string;
  beforeAll(async () => {
    database = await createTestDatabase();
    // The older release's function files: one body older, and a newer function it does not know.
    older = await mkdtemp(path.join(tmpdir(), 'omb-older-functions-'));
    await cp(FUNCTIONS_FOLDER, older, { recursive: true });
    const paidPlans = path.join(older, 'omb_paid_plans.sql');
    await writeFile(paidPlans, (await readFile(paidPlans, 'utf8')).replace('GROUP BY g.holder_installation_id', 'GROUP BY 1'));
    await rm(path.join(older, 'omb_ingest_trigger_disabled.sql'));
  });
  afterAll(async () => {
    await database?.drop();
    if (older) await rm(older, { recursive: true, force: true });
  });

  const paidPlansBody = async () =>
    (await database.sql<{ source: string }[]>`select prosrc as source from pg_proc where proname = 'omb_paid_plans'`)[0]!.source;

  it("runs none of the migrations it does not know: drizzle applies only those after the database's newest", async () => {
    const folder = await mkdtemp(path.join(tmpdir(), 'omb-older-migrations-'));
    try {
      await cp(path.join(previous.folder, 'migrations'), folder, { recursive: true });
      // One the older release would have, numbered before the newest the database holds.
      const journal = await readJournal(folder);
      const last = journal.entries.at(-1)!;
      journal.entries.push({ ...last, idx: last.idx + 1, when: last.when + 500, tag: '0017_older_never_applied' });
      await writeFile(path.join(folder, 'meta', '_journal.json'), JSON.stringify(journal));
      await writeFile(path.join(folder, '0017_older_never_applied.sql'), 'CREATE TABLE "older_never_applied" ("id" integer);');
      const count = async () => (await database.sql<{ n: number }[]>`select count(*)::int as n from drizzle.__drizzle_migrations`)[0]!.n;
      const recorded = await count();
      const [newest] = await database.sql<{ when: string }[]>`select max(created_at)::text as when from drizzle.__drizzle_migrations`;
      expect(Number(newest!.when), 'HEAD has a migration after the older release').toBeGreaterThan(last.when + 500);
      await migrate(drizzle(database.sql), { migrationsFolder: folder });
      expect(await count()).toBe(recorded);
      expect((await database.sql`select to_regclass('older_never_applied') as t`)[0]!.t).toBeNull();
    } finally {
      await rm(folder, { recursive: true, force: true });
    }
  });

  it('applies none of its function files and forgets nothing, saying so once', async () => {
    const ledgerBefore = await ledger(database.sql);
    expect(new Set(ledgerBefore.map((row) => row.release))).toEqual(new Set([RELEASE]));
    const bodyBefore = await paidPlansBody();
    const { logger, lines } = recordingLogger();
    await applyMigrations(database.url, logger, { functionsFolder: older, release: '0.1.9' });
    expect(await ledger(database.sql)).toEqual(ledgerBefore);
    expect(await paidPlansBody()).toBe(bodyBefore);
    expect(lines.filter((line) => String(line.msg).includes('newer than'))).toEqual([
      expect.objectContaining({ release: '0.1.9', databaseRelease: RELEASE }),
    ]);
  });

  it('of the same release, applies what changed and forgets what it does not have', async () => {
    expect(await paidPlansBody()).not.toContain('GROUP BY 1');
    await applyMigrations(database.url, createLogger('silent'), { functionsFolder: older, release: RELEASE });
    expect(await paidPlansBody()).toContain('GROUP BY 1');
    const rows = await ledger(database.sql);
    expect(rows.map((row) => row.name)).not.toContain('omb_ingest_trigger_disabled');
  });

  it('once a newer release has found the files current, an older one leaves them', async () => {
    await applyMigrations(database.url, createLogger('silent'), { release: '0.3.0' });
    expect(await paidPlansBody()).not.toContain('GROUP BY 1');
    const rows = await ledger(database.sql);
    expect(new Set(rows.map((row) => row.release))).toEqual(new Set(['0.3.0']));
    expect(rows.map((row) => row.name)).toContain('omb_ingest_trigger_disabled');
    await applyMigrations(database.url, createLogger('silent'), { functionsFolder: older, release: RELEASE });
    expect(await ledger(database.sql)).toEqual(rows);
    expect(await paidPlansBody()).not.toContain('GROUP BY 1');
  });
});

describe('a migration waiting for a lock a serving broker holds', () => {
  const LOCK_TIMEOUT_MS = 1000;
  /** Beyond lock_timeout, for a loaded machine: still well short of how long the lock is held. */
  const MARGIN_MS = 2000;
  /**
   * Long enough for two attempts to fail first (the first waits lock_timeout, pauses at most
   * 250 ms, the second waits lock_timeout again: about 2.25 s), and 2 s past the bound on a read.
   */
  const HOLD_MS = 5000;
  const TAG = '0099_policy_probe';
  let database: TestDatabase;
  let folder: string;
  beforeAll(async () => {
    database = await createTestDatabase();
    // Two statements, the first harmless: a failure must leave neither.
    folder = await foldersWith(
      TAG,
      'CREATE TABLE "policy_probe" ("id" integer);\n--> statement-breakpoint\nALTER TABLE "triggers" ADD COLUMN "policy_probe" text;',
    );
  });
  afterAll(async () => {
    await database?.drop();
    if (folder) await rm(folder, { recursive: true, force: true });
  });

  /** A session of a serving broker holding `triggers` in a transaction (as a long read does), until `release()`. */
  async function holdTriggers(): Promise<{ release(): Promise<void> }> {
    const sql = postgres(database.url, { max: 1, onnotice: () => {} });
    const connection = await sql.reserve();
    await connection`begin`;
    await connection`lock table triggers in access share mode`;
    return {
      async release() {
        await connection`commit`;
        connection.release();
        await sql.end();
      },
    };
  }

  /** Ingest-style reads of `triggers` from a third session, one after another; each one's time until stopped. */
  function ingestReads(): { stop(): Promise<number[]> } {
    const sql = postgres(database.url, { max: 1, onnotice: () => {} });
    const times: number[] = [];
    let running = true;
    const loop = (async () => {
      while (running) {
        const startedAt = performance.now();
        await sql`select id from triggers where composio_trigger_id = ${'ti_policy_probe'}`;
        times.push(performance.now() - startedAt);
        await sleep(50);
      }
    })();
    return {
      async stop() {
        running = false;
        await loop;
        await sql.end();
        return times;
      },
    };
  }

  const schemaHasProbe = async () => {
    const [row] = await database.sql<{ table: string | null; column: number }[]>`
      select to_regclass('policy_probe')::text as table,
             (select count(*)::int from information_schema.columns where table_name = 'triggers' and column_name = 'policy_probe') as column`;
    return { table: row!.table !== null, column: row!.column > 0 };
  };

  it('gives up when the lock is never let go, naming the migration, with none of it applied and ingest never held up', async () => {
    const holder = await holdTriggers();
    const reads = ingestReads();
    const { logger, lines } = recordingLogger();
    let error: unknown;
    try {
      await applyMigrations(database.url, logger, { migrationsFolder: folder, lockTimeoutMs: LOCK_TIMEOUT_MS, retryForMs: 5000 });
    } catch (caught) {
      error = caught;
    } finally {
      await holder.release();
    }
    const times = await reads.stop();
    expect(error).toBeInstanceOf(MigrationError);
    expect((error as Error).message).toMatch(
      new RegExp(
        `^migration ${TAG} gave up after \\d+ attempts in \\d+ s: each waited longer than lock_timeout for a lock another session held \\(lock_timeout 1000 ms\\), at: ALTER TABLE "triggers" ADD COLUMN "policy_probe" text; none of the pending migrations was applied`,
      ),
    );
    expect((error as Error).message).not.toContain('\n');
    expect(lines.filter((line) => line.step === `migration ${TAG}`).length).toBeGreaterThanOrEqual(2);
    expect(await schemaHasProbe()).toEqual({ table: false, column: false });
    expect(times.length).toBeGreaterThan(5);
    expect(Math.max(...times), 'the longest an ingest read waited').toBeLessThan(LOCK_TIMEOUT_MS + MARGIN_MS);
    expect(Math.max(...times)).toBeGreaterThan(LOCK_TIMEOUT_MS / 4);
  }, 60_000);

  it('succeeds on a retry once the lock is let go, and ingest is never held up longer than lock_timeout', async () => {
    const holder = await holdTriggers();
    const reads = ingestReads();
    const { logger, lines } = recordingLogger();
    const startedAt = Date.now();
    let releasedAt = Number.POSITIVE_INFINITY;
    const letGo = sleep(HOLD_MS).then(async () => {
      await holder.release();
      releasedAt = Date.now();
    });
    try {
      await applyMigrations(database.url, logger, { migrationsFolder: folder, lockTimeoutMs: LOCK_TIMEOUT_MS, retryForMs: 60_000 });
    } finally {
      await letGo;
    }
    const doneAt = Date.now();
    const times = await reads.stop();
    expect(doneAt).toBeGreaterThanOrEqual(releasedAt);
    expect(releasedAt - startedAt).toBeGreaterThanOrEqual(HOLD_MS);
    expect(Math.max(...times), 'the longest an ingest read waited').toBeLessThan(LOCK_TIMEOUT_MS + MARGIN_MS);
    // Reads did queue behind the migration's ALTER, so the bound above says something.
    expect(Math.max(...times)).toBeGreaterThan(LOCK_TIMEOUT_MS / 4);
    const retries = lines.filter((line) => line.step === `migration ${TAG}`);
    expect(retries.length).toBeGreaterThanOrEqual(2);
    expect(retries[0]).toMatchObject({ code: '55P03', statement: 'ALTER TABLE "triggers" ADD COLUMN "policy_probe" text' });
    expect(await schemaHasProbe()).toEqual({ table: true, column: true });
  }, 60_000);
});
