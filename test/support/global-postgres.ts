import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { startEmbeddedPostgres } from '../../src/db/embedded.js';
import { createLogger } from '../../src/logger.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** A Postgres URL with the right to create databases; each test file makes its own. */
    pgAdminUrl: string;
  }
}

/**
 * One Postgres server for the whole run: `DATABASE_URL` when set, a testcontainers Postgres when a
 * Docker engine answers, otherwise an embedded Postgres in a temporary folder.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  // Unit tests never touch Postgres: `npm run test:unit` starts none.
  if (project.vitest.projects.every((p) => p.name === 'unit')) return async () => {};
  if (process.env.DATABASE_URL) {
    project.provide('pgAdminUrl', process.env.DATABASE_URL);
    return async () => {};
  }
  if (dockerAvailable()) {
    const { PostgreSqlContainer } = await import('@testcontainers/postgresql');
    const container = await new PostgreSqlContainer('postgres:18-alpine').withCommand(['postgres', '-c', 'max_connections=400']).start();
    project.provide('pgAdminUrl', container.getConnectionUri());
    return async () => {
      await container.stop();
    };
  }
  const dataDir = await mkdtemp(path.join(tmpdir(), 'omb-test-pg-'));
  const server = await startEmbeddedPostgres({
    dataDir,
    logger: createLogger('warn'),
    database: 'postgres',
    extraFlags: ['-c', 'max_connections=400', '-c', 'fsync=off', '-c', 'synchronous_commit=off'],
  });
  project.provide('pgAdminUrl', server.url);
  return async () => {
    await server.stop();
    await rm(dataDir, { recursive: true, force: true });
  };
}

function dockerAvailable(): boolean {
  if (process.env.DOCKER_HOST) return true;
  return existsSync('/var/run/docker.sock');
}
