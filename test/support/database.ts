import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { inject } from 'vitest';
import { type Database, openDatabase } from '../../src/db/database.js';
import { createLogger } from '../../src/logger.js';

/**
 * A fresh, migrated database of its own for one test file, dropped by `drop()`: a copy of the
 * run's template, which global-postgres.ts migrated when the run began.
 */
export interface TestDatabase extends Database {
  readonly name: string;
  drop(): Promise<void>;
}

export async function createTestDatabase(): Promise<TestDatabase> {
  const adminUrl = inject('pgAdminUrl');
  const name = `omb_test_${randomBytes(6).toString('hex')}`;
  await admin(adminUrl).unsafe(`create database ${name} template ${inject('pgTemplate')}`);
  const database = openDatabase({ url: withDatabase(adminUrl, name), poolSize: 8, logger: createLogger('silent') });
  return {
    ...database,
    name,
    async drop() {
      await database.close();
      await admin(adminUrl).unsafe(`drop database if exists ${name} with (force)`);
    },
  };
}

let shared: { url: string; sql: postgres.Sql } | undefined;

/**
 * One connection to create and drop the databases of the files a worker runs one after another
 * (their modules are shared, see vitest.config.ts), rather than two new ones per file. It closes
 * itself once idle for a few seconds, so that nothing holds the worker open, and opens again when
 * next used.
 */
function admin(url: string): postgres.Sql {
  if (shared?.url !== url) shared = { url, sql: postgres(url, { max: 1, idle_timeout: 5, onnotice: () => {} }) };
  return shared.sql;
}

export function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}
