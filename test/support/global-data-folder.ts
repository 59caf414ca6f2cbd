import { mkdtemp, rm } from 'node:fs/promises';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { dataFolderParent, initialiseDataFolder } from './data-folder.js';
import { runsProcessTests } from './global-build.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /**
     * A broker data folder whose embedded Postgres this run initialised once (`initdb`, the
     * folder's password, the broker's database; nothing migrated), stopped. `initialisedFolder()`
     * hands out copies. Provided only when the run includes a file of process-files.ts.
     */
    dataFolderTemplate: string;
  }
}

/**
 * `initdb` is over a second of CPU and most of a first start; the files that start brokers and
 * Postgres servers of their own on folders that need not be fresh copy this one instead (see
 * data-folder.ts). Made while the other global setup runs; the tests about a fresh folder still
 * make an empty one.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  if (!(await runsProcessTests(project))) return async () => {};
  const dir = await mkdtemp(path.join(await dataFolderParent(), 'omb-test-folder-'));
  await initialiseDataFolder(dir);
  project.provide('dataFolderTemplate', dir);
  return () => rm(dir, { recursive: true, force: true });
}
