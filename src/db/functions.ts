import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from 'pino';
import type postgres from 'postgres';
import { compareReleases, RELEASE } from '../release.js';

/**
 * The database functions. Each one's current definition is one file, `migrations/functions/<name>.sql`,
 * and nowhere else: a versioned migration would copy the whole function for every change, so
 * learning what runs today meant reading them all. After the versioned migrations, every file whose
 * text changed since it was last applied is applied again; `applied_functions` holds the hash of
 * each file as applied.
 *
 * The changed files are applied in one transaction, so running brokers see the old set of
 * functions or the new one, never a mix, and a file that fails leaves the ledger as it was. They go
 * in dependency order, each after the functions it calls: Postgres checks a `LANGUAGE sql` body
 * against the functions it names when it is created.
 *
 * Each ledger row also names the newest release whose broker applied the file's text or found it
 * current. A broker of an older release than the newest recorded (started on a database a newer
 * release migrated, or still running beside it) applies no function file and forgets no ledger
 * row: its older bodies would replace the newer ones for every process, and it would forget the
 * functions it does not know. The same release applies what changed, as does a newer one, which
 * also records its release on the rows whose text it found current. (0.1.0 predates this guard: it
 * applies its own files whatever the ledger says; see docs/migrations.md.)
 */

export interface FunctionFile {
  /** The function's name, which is the file's name without `.sql`. */
  readonly name: string;
  readonly path: string;
  readonly text: string;
  readonly sha256: string;
}

async function readFunctionFiles(folder: string): Promise<FunctionFile[]> {
  const files = (await readdir(folder)).filter((file) => file.endsWith('.sql')).sort();
  return Promise.all(
    files.map(async (file) => {
      const filePath = path.join(folder, file);
      const text = await readFile(filePath, 'utf8');
      const name = path.basename(file, '.sql');
      // Postgres folds unquoted names to lower case: a file named otherwise could not match its function.
      if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`${filePath}: a function file is named as its function, in lower case`);
      const defined = definedFunctions(text);
      if (defined.length !== 1 || defined[0] !== name) {
        throw new Error(`${filePath} must define exactly one function, ${name}; it defines ${defined.join(', ') || 'none'}`);
      }
      return { name, path: filePath, text, sha256: createHash('sha256').update(text).digest('hex') };
    }),
  );
}

/** The SQL without its comments, which may name functions it does not call. */
export function withoutComments(sql: string): string {
  // Strings and quoted names are matched too, so that `--` inside one is not taken for a comment
  // (a doubled quote inside one reads as two strings side by side, which is the same here).
  return sql.replace(/'[^']*'|"[^"]*"|--[^\n]*|\/\*[\s\S]*?\*\//g, (token) =>
    token.startsWith('--') || token.startsWith('/*') ? ' ' : token,
  );
}

/** The names of the functions the SQL creates. */
function definedFunctions(sql: string): string[] {
  return [...withoutComments(sql).matchAll(/\bcreate\s+(?:or\s+replace\s+)?function\s+([\w$."]+)/gi)].map((m) => m[1]!);
}

/** The files in an order they can be applied in: each after the other files' functions it names. */
export function dependencyOrder(files: readonly FunctionFile[]): FunctionFile[] {
  const byName = new Map(files.map((file) => [file.name, file]));
  const calls = new Map(
    files.map((file) => {
      const code = withoutComments(file.text);
      const named = files.filter((other) => other !== file && new RegExp(`(?<![\\w$])${other.name}(?![\\w$])`, 'i').test(code));
      return [file.name, named.map((other) => other.name)];
    }),
  );
  const ordered: FunctionFile[] = [];
  const done = new Set<string>();
  const visiting: string[] = [];
  const visit = (name: string): void => {
    if (done.has(name)) return;
    if (visiting.includes(name)) {
      const cycle = [...visiting.slice(visiting.indexOf(name)), name].join(' → ');
      throw new Error(`the function files name one another in a cycle (${cycle}), so no order can apply them`);
    }
    visiting.push(name);
    for (const called of calls.get(name)!) visit(called);
    visiting.pop();
    done.add(name);
    ordered.push(byName.get(name)!);
  };
  for (const file of files) visit(file.name);
  return ordered;
}

/** A function file that could not be applied; the cause is Postgres's error. */
export class FunctionFileError extends Error {
  constructor(
    readonly file: string,
    cause: unknown,
  ) {
    super(`${file} could not be applied: ${(cause as Error).message}`, { cause });
    this.name = 'FunctionFileError';
  }
}

export interface ApplyFunctionFilesOptions {
  /** The release applying them: this broker's (package.json's version) unless a test says otherwise. */
  readonly release?: string;
  /** Told, once, when the database is at a newer release and nothing is applied. */
  readonly logger?: Logger;
}

/**
 * Applies the function files in `folder` that changed since they were last applied and records
 * them; answers the names of those applied. The caller holds the migration lock.
 */
export async function applyFunctionFiles(sql: postgres.Sql, folder: string, options: ApplyFunctionFilesOptions = {}): Promise<string[]> {
  const release = options.release ?? RELEASE;
  const files = dependencyOrder(await readFunctionFiles(folder));
  const ledger = await sql<{ functionName: string; sha256: string; release: string | null }[]>`
    select function_name as "functionName", sha256, release from applied_functions`;
  const newest = ledger.reduce<string | undefined>(
    (found, row) => (row.release !== null && (found === undefined || compareReleases(row.release, found) > 0) ? row.release : found),
    undefined,
  );
  if (newest !== undefined && compareReleases(release, newest) < 0) {
    options.logger?.warn(
      { component: 'database', release, databaseRelease: newest },
      `the database is at release ${newest}, newer than this broker's ${release}: its function files are left as they are`,
    );
    return [];
  }
  const byName = new Map(files.map((file) => [file.name, file]));
  const applied = new Map(ledger.map((row) => [row.functionName, row.sha256]));
  const changed = files.filter((file) => applied.get(file.name) !== file.sha256);
  // A function whose file was removed is dropped by a migration; the ledger forgets it.
  const removed = [...applied.keys()].filter((name) => !byName.has(name));
  // The files this release found current, recorded under an older release (or none, by 0.1.0).
  const confirmed = ledger
    .filter((row) => byName.get(row.functionName)?.sha256 === row.sha256)
    .filter((row) => row.release === null || compareReleases(row.release, release) < 0)
    .map((row) => row.functionName);
  if (changed.length === 0 && removed.length === 0 && confirmed.length === 0) return [];
  await sql.begin(async (tx) => {
    if (removed.length > 0) await tx`delete from applied_functions where function_name = any(${removed}::text[])`;
    for (const file of changed) {
      try {
        await tx.unsafe(file.text);
      } catch (error) {
        throw new FunctionFileError(file.path, error);
      }
      await tx`
        insert into applied_functions (function_name, sha256, release) values (${file.name}, ${file.sha256}, ${release})
        on conflict (function_name) do update set sha256 = excluded.sha256, release = excluded.release, applied_at = now()`;
    }
    if (confirmed.length > 0) await tx`update applied_functions set release = ${release} where function_name = any(${confirmed}::text[])`;
  });
  return changed.map((file) => file.name);
}
