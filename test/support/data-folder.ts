import { execFile } from 'node:child_process';
import { mkdtemp, rm, statfs } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { inject } from 'vitest';
import { startEmbeddedPostgres } from '../../src/db/embedded.js';
import { PASSWORD_FILE } from '../../src/db/embedded-password.js';
import { applyMigrations } from '../../src/db/migrate.js';
import { createLogger } from '../../src/logger.js';

/**
 * Broker data folders (`DATA_DIR`) whose embedded Postgres is already initialised and migrated,
 * for tests about a broker on a folder of its own that need not be a fresh one: `initdb` is most
 * of a first start. One folder is prepared (a copy of the run's initialised one, migrated by the
 * broker's own code), and each `copy()` is a copy of its `postgres/` and of the password it was
 * given (owners and modes kept, as `initdb` and the broker left them). Tests about a fresh folder
 * make an empty one instead.
 *
 * The folders are made in memory (`/dev/shm`) when it has room to spare: a copy there takes a
 * tenth of the time a copy on disk does, and so do initdb's and Postgres's own writes. What the
 * tests look at (the folder's lock, `postmaster.pid`, the server's processes) is the same on
 * either.
 */
export interface DataFolders {
  /** A new folder holding a copy of the prepared database. */
  copy(): Promise<string>;
  /** An empty new folder (the broker initialises it). */
  empty(): Promise<string>;
  /** Removes the prepared folder and every folder handed out. */
  remove(): Promise<void>;
}

export async function prepareDataFolders(prefix: string): Promise<DataFolders> {
  const folders: string[] = [];
  const parent = await dataFolderParent();
  const empty = async () => {
    const folder = await mkdtemp(path.join(parent, prefix));
    folders.push(folder);
    return folder;
  };
  const template = await initialisedFolder(prefix);
  folders.push(template);
  const logger = createLogger('warn');
  const server = await startEmbeddedPostgres({ dataDir: template, logger });
  try {
    await applyMigrations(server.url, logger);
  } finally {
    await server.stop();
  }
  return {
    empty,
    async copy() {
      const folder = await empty();
      await copyDatabase(template, folder);
      return folder;
    },
    async remove() {
      await Promise.all(folders.map((folder) => rm(folder, { recursive: true, force: true })));
    },
  };
}

/** The folder's Postgres and its password, owners and modes kept, into `to`. */
async function copyDatabase(from: string, to: string): Promise<void> {
  await promisify(execFile)('cp', ['-a', path.join(from, 'postgres'), path.join(from, PASSWORD_FILE), to]);
}

/**
 * A new data folder (the caller removes it) whose embedded Postgres is initialised and stopped,
 * nothing migrated: a copy of the run's (global-data-folder.ts), or, in a run without one,
 * initialised here.
 */
export async function initialisedFolder(prefix: string): Promise<string> {
  const folder = await mkdtemp(path.join(await dataFolderParent(), prefix));
  const template = runTemplate();
  if (template) await copyDatabase(template, folder);
  else await initialiseDataFolder(folder);
  return folder;
}

/** Initialises the embedded Postgres in `folder` by the broker's own code (initdb, its password, its database), then stops it. */
export async function initialiseDataFolder(folder: string): Promise<void> {
  await (await startEmbeddedPostgres({ dataDir: folder, logger: createLogger('warn') })).stop();
}

function runTemplate(): string | undefined {
  try {
    return inject('dataFolderTemplate');
  } catch {
    // Not in a Vitest worker (a bench script): there is none.
    return undefined;
  }
}

/** In memory room enough for many folders of about 50 MB each, and for Postgres's own shared memory beside them. */
const MEMORY_ROOM_BYTES = 2 * 1024 ** 3;
const MEMORY = '/dev/shm';

/**
 * Where to make a new data folder: `/dev/shm` when it is there with room to spare (a container's
 * default is 64 MB, too little), the temporary folder otherwise.
 */
export async function dataFolderParent(): Promise<string> {
  try {
    const room = await statfs(MEMORY);
    if (room.bavail * room.bsize >= MEMORY_ROOM_BYTES) return MEMORY;
  } catch {
    // No /dev/shm (not Linux): the temporary folder.
  }
  return tmpdir();
}
