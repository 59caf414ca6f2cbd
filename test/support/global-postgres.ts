import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import path from 'node:path';
import postgres from 'postgres';
import type { TestProject } from 'vitest/node';
import { startEmbeddedPostgres } from '../../src/db/embedded.js';
import { applyMigrations } from '../../src/db/migrate.js';
import { createLogger } from '../../src/logger.js';
import { dataFolderParent } from './data-folder.js';
import { withDatabase } from './database.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** A Postgres URL with the right to create databases; each test file makes its own. */
    pgAdminUrl: string;
    /** A database migrated once for the run, which each test file's database is copied from. */
    pgTemplate: string;
  }
}

/**
 * One Postgres server for the whole run: `DATABASE_URL` when set, a testcontainers Postgres when a
 * Docker engine answers, otherwise an embedded Postgres in a temporary folder.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  // Unit tests never touch Postgres: `npm run test:unit` starts none.
  if (project.vitest.projects.every((p) => p.name === 'unit')) return async () => {};
  const stopServer = await startServer(project);
  const dropTemplate = await migratedTemplate(project);
  return async () => {
    await dropTemplate();
    await stopServer();
  };
}

/**
 * Copying a migrated database is several times faster than creating and migrating one, and
 * every test file makes one. The name is the run's own, so runs sharing a server keep apart.
 */
async function migratedTemplate(project: TestProject): Promise<() => Promise<void>> {
  const adminUrl = project.getProvidedContext().pgAdminUrl;
  const name = `omb_template_${randomBytes(6).toString('hex')}`;
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`create database ${name}`);
    await applyMigrations(withDatabase(adminUrl, name), createLogger('silent'));
  } finally {
    await admin.end();
  }
  project.provide('pgTemplate', name);
  return async () => {
    const cleanup = postgres(adminUrl, { max: 1, onnotice: () => {} });
    try {
      await cleanup.unsafe(`drop database if exists ${name} with (force)`);
    } finally {
      await cleanup.end();
    }
  };
}

async function startServer(project: TestProject): Promise<() => Promise<void>> {
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
  // In memory when there is room (see data-folder.ts): each test file's database is a thousand
  // files made and removed again, which on a disk's file system was most of Postgres's time.
  const dataDir = await mkdtemp(path.join(await dataFolderParent(), 'omb-test-pg-'));
  const server = await startEmbeddedPostgres({
    dataDir,
    logger: createLogger('warn'),
    database: 'postgres',
    extraFlags: ['-c', 'max_connections=400', '-c', 'fsync=off', '-c', 'synchronous_commit=off'],
  });
  await cheaperPasswordCheck(server.url);
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

/**
 * The server's password stored again hashed with one SCRAM iteration instead of 4,096. Each
 * connection still proves the password (the same SCRAM exchange, on both sides), but without
 * some 4 ms of processor between the client and the server: about 1,500 connections a run.
 */
async function cheaperPasswordCheck(url: string): Promise<void> {
  const { username, password } = new URL(url);
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await sql.begin(async (tx) => {
      await tx`set local scram_iterations = 1`;
      const role = `"${decodeURIComponent(username).replaceAll('"', '""')}"`;
      await tx.unsafe(`alter role ${role} password '${decodeURIComponent(password).replaceAll("'", "''")}'`);
    });
  } finally {
    await sql.end();
  }
}
