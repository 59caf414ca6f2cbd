import { execFile } from 'node:child_process';
import { createReadStream, createWriteStream } from 'node:fs';
import { chmod, chown, type FileHandle, lstat, mkdir, open, readdir, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { Readable, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { promisify } from 'node:util';
import { createGunzip, createGzip } from 'node:zlib';
import postgres from 'postgres';
import { KEY_FILE } from '../data-keys/keys.js';
import { RELEASE } from '../release.js';
import { END, header, padding, readTar, type TarEntry, writeTo } from './tar.js';

/**
 * A backup of the embedded default's data folder (`DATA_DIR`) while the broker serves, and its
 * restore into an empty folder: Postgres's low-level backup API over the running server, no other
 * tool. The archive is a gzipped tar:
 *
 * 1. `omb-backup.json` (what this is, which release wrote it, where its WAL starts);
 * 2. the folder's files — the database password file and Postgres's `postgres/` — copied while
 *    Postgres runs, between `pg_backup_start` and `pg_backup_stop` (full-page writes make the
 *    pages torn by a concurrent write whole again on replay);
 * 3. `postgres/backup_label`, as `pg_backup_stop` gave it;
 * 4. the WAL from the backup's start to its end, kept from recycling meanwhile by a temporary
 *    replication slot: what replays the copy to the moment the backup ended;
 * 5. `omb-backup-end.json`: without it the archive is incomplete, and refused.
 *
 * Restored, Postgres finds the label at its first start and replays the WAL: the database is as
 * it was when the backup ended, everything committed before the backup began included.
 * Left out: the broker's folder lock (`broker.pid`), the data key file (`data-keys`), Postgres's runtime files, and what
 * pg_basebackup leaves out too (the contents of pg_replslot, pg_dynshmem, pg_notify, pg_serial,
 * pg_snapshots, pg_stat_tmp, pg_subtrans; temporary files).
 */

const MARKER = 'omb-backup.json';
const END_MARKER = 'omb-backup-end.json';
const FORMAT = 1;

/**
 * The broker's own files in DATA_DIR left out: its lock, and the data key file, without which the
 * events' data in the backup cannot be read (a backup must not carry its own key; kept apart).
 */
const FOLDER_EXCLUDED = new Set(['broker.pid', KEY_FILE]);
/** Postgres's files that a copy leaves out (see above), by their path under `postgres/`. */
const SERVER_EXCLUDED_FILES = new Set([
  'postmaster.pid',
  'postmaster.opts',
  'backup_label',
  'backup_label.old',
  'tablespace_map',
  'tablespace_map.old',
]);
const SERVER_EMPTIED_FOLDERS = new Set([
  'pg_wal',
  'pg_replslot',
  'pg_dynshmem',
  'pg_notify',
  'pg_serial',
  'pg_snapshots',
  'pg_stat_tmp',
  'pg_subtrans',
]);

export interface BackupSummary {
  readonly files: number;
  readonly bytes: number;
  readonly startLsn: string;
  readonly stopLsn: string;
}

interface Archive {
  add(entry: TarEntry, content?: AsyncIterable<Buffer> | Buffer): Promise<void>;
  readonly count: { files: number; bytes: number };
}

function archive(out: Writable): Archive {
  const count = { files: 0, bytes: 0 };
  return {
    count,
    async add(entry, content) {
      await writeTo(out, header(entry, new Date()));
      if (entry.type === 'file') {
        let written = 0;
        const chunks = content === undefined ? [] : Buffer.isBuffer(content) ? [content] : content;
        for await (const chunk of chunks) {
          const take = chunk.subarray(0, entry.size - written);
          if (take.length > 0) await writeTo(out, take);
          written += take.length;
        }
        // A file that became shorter while it was read: zeros to the size its header gave, as
        // pg_basebackup does (replay rewrites what changed).
        if (written < entry.size) await writeTo(out, Buffer.alloc(entry.size - written));
        await writeTo(out, padding(entry.size));
        count.files += 1;
        count.bytes += entry.size;
      }
    },
  };
}

/** A file's bytes up to `size`, read as it is now; nothing if it is gone (a dropped table). */
async function* fileContent(file: string, size: number): AsyncGenerator<Buffer> {
  const handle = await open(file, 'r');
  try {
    let position = 0;
    while (position < size) {
      const buffer = Buffer.allocUnsafe(Math.min(256 * 1024, size - position));
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, position);
      if (bytesRead === 0) return;
      position += bytesRead;
      yield buffer.subarray(0, bytesRead);
    }
  } finally {
    await handle.close();
  }
}

async function addFile(out: Archive, absolute: string, relative: string): Promise<void> {
  let info: Awaited<ReturnType<typeof stat>>;
  try {
    info = await lstat(absolute);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw error;
  }
  if (info.isDirectory()) {
    await out.add({ path: relative, type: 'folder', mode: info.mode, size: 0 });
    return;
  }
  if (!info.isFile()) return;
  let content: AsyncGenerator<Buffer>;
  try {
    content = fileContent(absolute, info.size);
    // Opened now, so that a file removed since it was listed is skipped before its header is written.
    const first = await content.next();
    const rest = content;
    await out.add(
      { path: relative, type: 'file', mode: info.mode, size: info.size },
      (async function* () {
        if (!first.done) yield first.value;
        yield* rest;
      })(),
    );
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw error;
  }
}

async function addTree(
  out: Archive,
  root: string,
  relative: string,
  skip: (relative: string, isFolder: boolean) => boolean,
): Promise<void> {
  let names: string[];
  try {
    names = (await readdir(path.join(root, relative))).sort();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw error;
  }
  for (const name of names) {
    const child = relative === '' ? name : `${relative}/${name}`;
    const absolute = path.join(root, child);
    const info = await lstat(absolute).catch(() => undefined);
    if (!info) continue;
    if (skip(child, info.isDirectory())) continue;
    await addFile(out, absolute, child);
    if (info.isDirectory()) await addTree(out, root, child, skip);
  }
}

/** Left out of the copy (see above): `relative` is under DATA_DIR. */
function excluded(relative: string, isFolder: boolean): boolean {
  if (!relative.includes('/')) return FOLDER_EXCLUDED.has(relative);
  const [top, ...rest] = relative.split('/');
  if (top !== 'postgres') return false;
  const inServer = rest.join('/');
  const name = rest.at(-1)!;
  if (name.startsWith('pgsql_tmp') || name === 'pg_internal.init') return true;
  if (!isFolder && SERVER_EXCLUDED_FILES.has(inServer)) return true;
  // The folders themselves are kept (Postgres needs them), not what is in them.
  return rest.length >= 2 && SERVER_EMPTIED_FOLDERS.has(rest[0]!);
}

/**
 * Writes the backup of `dataDir`, whose Postgres answers at `url` (a superuser, as the embedded
 * server's own user is), to `file`: first as `file.partial`, renamed only once whole.
 */
export async function backupDataFolder(options: {
  dataDir: string;
  url: string;
  file: string;
  progress: (line: string) => void;
}): Promise<BackupSummary> {
  const dataDir = path.resolve(options.dataDir);
  const partial = `${options.file}.partial`;
  // Before the backup begins: a file that cannot be written is said at once, and costs nothing.
  const handle = await createPartial(options.file, partial);
  const sql = postgres(options.url, { max: 1, onnotice: () => {}, connect_timeout: 10, idle_timeout: 0 });
  const gzip = createGzip({ level: 6 });
  const written = pipeline(gzip, handle.createWriteStream());
  written.catch(() => {});
  let started = false;
  try {
    const out = archive(gzip);
    const slot = `omb_backup_${process.pid}_${Date.now()}`;
    // Temporary: dropped when this session ends, however it ends.
    await sql`select pg_create_physical_replication_slot(${slot}, true, true)`;
    const [start] = await sql<{ lsn: string; segment: string }[]>`
      select lsn::text, pg_walfile_name(lsn) as segment from pg_backup_start(${`omb-broker ${RELEASE}`}, true) as lsn`;
    started = true;
    options.progress(`backup started at WAL ${start!.lsn}; copying ${dataDir}`);
    await out.add(
      ...fileOf(MARKER, JSON.stringify({ format: FORMAT, release: RELEASE, startedAt: new Date().toISOString(), startLsn: start!.lsn })),
    );
    await addTree(out, dataDir, '', excluded);
    const [stop] = await sql<{ lsn: string; labelfile: string; spcmapfile: string }[]>`
      select lsn::text, labelfile, spcmapfile from pg_backup_stop(false)`;
    started = false;
    // The segment holding the backup's end is finished and on disk before it is copied.
    const [ended] = await sql<{ segment: string }[]>`select pg_walfile_name(${stop!.lsn}::pg_lsn) as segment from pg_switch_wal()`;
    await out.add(...fileOf('postgres/backup_label', stop!.labelfile));
    if (stop!.spcmapfile) await out.add(...fileOf('postgres/tablespace_map', stop!.spcmapfile));
    const wal = path.join(dataDir, 'postgres', 'pg_wal');
    const segments = (await readdir(wal)).filter(
      (name) => (/^[0-9A-F]{24}$/.test(name) && name >= start!.segment && name <= ended!.segment) || /^[0-9A-F]{8}\.history$/.test(name),
    );
    for (const name of segments.sort()) await addFile(out, path.join(wal, name), `postgres/pg_wal/${name}`);
    await out.add(...fileOf(END_MARKER, JSON.stringify({ stopLsn: stop!.lsn, files: out.count.files })));
    gzip.end(END);
    await written;
    await rename(partial, options.file);
    return { files: out.count.files, bytes: out.count.bytes, startLsn: start!.lsn, stopLsn: stop!.lsn };
  } catch (error) {
    if (started) await sql`select pg_backup_stop(false)`.catch(() => undefined);
    gzip.destroy();
    await written.catch(() => undefined);
    await rm(partial, { force: true });
    throw error;
  } finally {
    await sql.end({ timeout: 5 });
  }
}

function fileOf(name: string, text: string): [TarEntry, Buffer] {
  const content = Buffer.from(text, 'utf8');
  return [{ path: name, type: 'file', mode: 0o600, size: content.length }, content];
}

/** Whether the folder is missing or holds nothing. */
async function isEmptyFolder(dir: string): Promise<boolean> {
  try {
    return (await readdir(dir)).length === 0;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return true;
    throw error;
  }
}

/** The backup's file cannot be written where it was asked for; nothing was started. */
export class BackupRefused extends Error {
  override name = 'BackupRefused';
}

/** `partial`, made for this backup alone (it must not exist): refused, saying why, when it cannot be. */
async function createPartial(file: string, partial: string): Promise<FileHandle> {
  try {
    return await open(partial, 'wx', 0o600);
  } catch (error) {
    const folder = path.dirname(partial);
    const code = (error as NodeJS.ErrnoException).code;
    const why =
      code === 'ENOENT'
        ? `the folder ${folder} does not exist`
        : code === 'ENOTDIR'
          ? `${folder} is not a folder`
          : code === 'EEXIST'
            ? `${partial} exists, left by a backup that did not finish; remove it, or name another file`
            : code === 'EACCES' || code === 'EPERM'
              ? `this user may not write in ${folder}`
              : (error as Error).message;
    throw new BackupRefused(`cannot write ${file}: ${why}`, { cause: error });
  }
}

export class RestoreRefused extends Error {
  override name = 'RestoreRefused';
}

/**
 * Restores a backup written by `backupDataFolder` into `dataDir`, which must be missing or empty;
 * the next broker started on it replays the WAL. As root, `postgres/` is given to the user the
 * embedded Postgres runs as (`postgres`), as a first start would. On any failure the folder is
 * emptied again.
 */
export async function restoreDataFolder(options: {
  dataDir: string;
  file: string;
  progress: (line: string) => void;
}): Promise<{ files: number; release: string }> {
  const dataDir = path.resolve(options.dataDir);
  if (!(await isEmptyFolder(dataDir))) {
    throw new RestoreRefused(
      `DATA_DIR ${dataDir} is not empty: a backup is restored only into an empty folder (or one that does not exist yet)`,
    );
  }
  const given = await stat(options.file).catch(() => {
    throw new RestoreRefused(`no backup file at ${path.resolve(options.file)}`);
  });
  if (!given.isFile()) throw new RestoreRefused(`${path.resolve(options.file)} is not a file: name the backup file itself`);
  const existed = await stat(dataDir).then(
    () => true,
    () => false,
  );
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  try {
    const result = await extract(options.file, dataDir);
    if (process.getuid?.() === 0) await giveToPostgresUser(path.join(dataDir, 'postgres'));
    return result;
  } catch (error) {
    if (existed) for (const name of await readdir(dataDir)) await rm(path.join(dataDir, name), { recursive: true, force: true });
    else await rm(dataDir, { recursive: true, force: true });
    throw error;
  }
}

async function extract(file: string, dataDir: string): Promise<{ files: number; release: string }> {
  // Joined so that a read that fails (a file that cannot be read) fails the restore, as a damaged one does.
  const input = createGunzip();
  pipeline(createReadStream(file), input).catch(() => {});
  let release: string | undefined;
  let complete = false;
  let files = 0;
  const folders: Array<{ dir: string; mode: number }> = [];
  try {
    for await (const { entry, content } of readTar(input)) {
      if (release === undefined) {
        if (entry.path !== MARKER) throw new RestoreRefused(`${file} is not a backup this broker wrote (it does not start with ${MARKER})`);
        const marker = JSON.parse(await text(content)) as { format?: unknown; release?: unknown };
        if (marker.format !== FORMAT)
          throw new RestoreRefused(`${file} is a backup of another format (${String(marker.format)}); this release reads format ${FORMAT}`);
        release = String(marker.release);
        continue;
      }
      if (complete) throw new RestoreRefused(`${file} holds entries after its end`);
      if (entry.path === END_MARKER) {
        complete = true;
        continue;
      }
      const target = path.join(dataDir, entry.path);
      if (entry.type === 'folder') {
        await mkdir(target, { recursive: true, mode: 0o700 });
        folders.push({ dir: target, mode: entry.mode });
        continue;
      }
      await mkdir(path.dirname(target), { recursive: true, mode: 0o700 });
      // A file that cannot be written (a full disk) fails the restore; never an 'error' event nobody hears.
      await pipeline(Readable.from(content), createWriteStream(target, { mode: entry.mode & 0o777, flags: 'wx' }));
      files += 1;
    }
  } catch (error) {
    if (error instanceof RestoreRefused) throw error;
    throw new RestoreRefused(`${file} cannot be restored: ${(error as Error).message}`);
  }
  if (release === undefined) throw new RestoreRefused(`${file} is empty`);
  if (!complete) throw new RestoreRefused(`${file} is incomplete (it has no ${END_MARKER}): it was cut short`);
  for (const { dir, mode } of folders) await chmod(dir, mode & 0o777);
  return { files, release };
}

async function text(content: AsyncIterable<Buffer>): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of content) chunks.push(chunk);
  return Buffer.concat(chunks).toString('utf8');
}

const run = promisify(execFile);

/** The embedded Postgres's user (made as its first start makes it, if this machine has none yet). */
async function giveToPostgresUser(serverDir: string): Promise<void> {
  const ids = async () => {
    const [uid, gid] = await Promise.all([run('id', ['-u', 'postgres']), run('id', ['-g', 'postgres'])]);
    return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
  };
  const { uid, gid } = await ids().catch(async () => {
    await run('groupadd', ['postgres']).catch(() => undefined);
    await run('useradd', ['-g', 'postgres', 'postgres']);
    return ids();
  });
  await chownTree(serverDir, uid, gid);
}

async function chownTree(target: string, uid: number, gid: number): Promise<void> {
  await chown(target, uid, gid);
  const info = await lstat(target);
  if (!info.isDirectory()) return;
  for (const name of await readdir(target)) await chownTree(path.join(target, name), uid, gid);
}
