import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { inject } from 'vitest';
import { type Database, openDatabase } from '../../src/db/database.js';
import { applyMigrations } from '../../src/db/migrate.js';
import { createLogger } from '../../src/logger.js';

/**
 * A fresh, migrated database of its own for one test file, dropped by `drop()`: a copy of the
 * run's template, migrated again in case a migration was added since the run began (a no-op
 * otherwise).
 */
export interface TestDatabase extends Database {
  readonly name: string;
  drop(): Promise<void>;
}

export async function createTestDatabase(): Promise<TestDatabase> {
  const adminUrl = inject('pgAdminUrl');
  const name = `omb_test_${randomBytes(6).toString('hex')}`;
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`create database ${name} template ${inject('pgTemplate')}`);
  } finally {
    await admin.end();
  }
  const url = withDatabase(adminUrl, name);
  const logger = createLogger('silent');
  await applyMigrations(url, logger);
  const database = openDatabase({ url, poolSize: 8, logger });
  return {
    ...database,
    name,
    async drop() {
      await database.close();
      const cleanup = postgres(adminUrl, { max: 1, onnotice: () => {} });
      try {
        await cleanup.unsafe(`drop database if exists ${name} with (force)`);
      } finally {
        await cleanup.end();
      }
    },
  };
}

export function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}
