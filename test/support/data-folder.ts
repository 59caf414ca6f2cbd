import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { startEmbeddedPostgres } from '../../src/db/embedded.js';
import { PASSWORD_FILE } from '../../src/db/embedded-password.js';
import { applyMigrations } from '../../src/db/migrate.js';
import { createLogger } from '../../src/logger.js';

/**
 * Broker data folders (`DATA_DIR`) whose embedded Postgres is already initialised and migrated,
 * for tests about a broker on a folder of its own that need not be a fresh one: `initdb` is most
 * of a first start. One folder is prepared, by the broker's own code, and each `copy()` is a
 * copy of its `postgres/` and of the password it was given (owners and modes kept, as `initdb`
 * and the broker left them). Tests about a fresh
 * folder make an empty one instead.
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
  const empty = async () => {
    const folder = await mkdtemp(path.join(tmpdir(), prefix));
    folders.push(folder);
    return folder;
  };
  const template = await empty();
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
      await promisify(execFile)('cp', ['-a', path.join(template, 'postgres'), path.join(template, PASSWORD_FILE), folder]);
      return folder;
    },
    async remove() {
      for (const folder of folders) await rm(folder, { recursive: true, force: true });
    },
  };
}
