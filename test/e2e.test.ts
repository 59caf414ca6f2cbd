import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import path from 'node:path';
import postgres from 'postgres';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { BROKER_ENV } from './events/helpers.js';
import { startBroker } from './support/broker-process.js';
import { dataFolderParent } from './support/data-folder.js';
import { withDatabase } from './support/database.js';

const cleanups: Array<() => Promise<unknown>> = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

async function json(response: Response): Promise<any> {
  return response.json();
}

async function freshFolder(): Promise<string> {
  const dataDir = await mkdtemp(path.join(await dataFolderParent(), 'omb-e2e-'));
  cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
  return dataDir;
}

describe('the broker over real HTTP, started as `npm start` starts it', () => {
  it('runs with no environment on an embedded Postgres that survives a restart', async () => {
    const dataDir = await freshFolder();

    const broker = await startBroker({ DATA_DIR: dataDir });
    cleanups.push(() => broker.stop());
    expect(broker.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);

    const health = await fetch(`${broker.url}/health`);
    expect(health.status).toBe(200);

    const registered = await fetch(`${broker.url}/v1/installations`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    expect(registered.status).toBe(201);
    const { installationId, token } = await json(registered);
    expect(token).toMatch(/^[0-9a-f]{64}$/);

    const me = await fetch(`${broker.url}/v1/me`, { headers: { authorization: `Bearer ${token}` } });
    expect(me.status).toBe(200);
    expect((await json(me)).installationId).toBe(installationId);

    const stranger = await fetch(`${broker.url}/v1/me`, {
      headers: { authorization: `Bearer ${randomBytes(32).toString('hex')}` },
    });
    expect(stranger.status).toBe(401);

    expect(await broker.stop()).toBe(0);
    expect(existsSync(path.join(dataDir, 'postgres', 'postmaster.pid'))).toBe(false);
    expect(broker.output()).not.toContain(token);

    const again = await startBroker({ DATA_DIR: dataDir });
    cleanups.push(() => again.stop());
    const meAgain = await fetch(`${again.url}/v1/me`, { headers: { authorization: `Bearer ${token}` } });
    expect(meAgain.status).toBe(200);
    expect(await again.stop()).toBe(0);
  }, 60_000);

  it('lets two brokers start at once on one fresh database and migrate it once', async () => {
    const adminUrl = inject('pgAdminUrl');
    const name = `omb_e2e_${randomBytes(6).toString('hex')}`;
    const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
    await admin.unsafe(`create database ${name}`);
    cleanups.push(async () => {
      await admin.unsafe(`drop database if exists ${name} with (force)`);
      await admin.end();
    });
    const url = withDatabase(adminUrl, name);
    // One of them also serves /metrics on a private address, its port chosen by the system.
    const [a, b] = await Promise.all([
      startBroker({ DATABASE_URL: url }),
      startBroker({ DATABASE_URL: url, METRICS_HOST: '127.0.0.1', METRICS_PORT: '0' }),
    ]);
    cleanups.push(
      () => a.stop(),
      () => b.stop(),
    );

    const { token } = await json(
      await fetch(`${a.url}/v1/installations`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' }),
    );
    expect((await fetch(`${b.url}/v1/me`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
    // The address it logs is the one it listens on.
    const metricsUrl = /"url":"(http:\/\/127\.0\.0\.1:\d+\/metrics)","msg":"metrics listening"/.exec(b.output())?.[1];
    expect(metricsUrl, b.output()).not.toMatch(/:0\/metrics$/);
    expect((await fetch(metricsUrl!)).status).toBe(200);

    const db = postgres(url, { max: 1, onnotice: () => {} });
    const applied = await db`select count(*)::int as n from drizzle.__drizzle_migrations`;
    await db.end();
    const { readdir } = await import('node:fs/promises');
    const files = (await readdir(path.resolve('migrations'))).filter((f) => f.endsWith('.sql'));
    expect(applied[0]!.n).toBe(files.length);
    expect(await a.stop()).toBe(0);
    expect(await b.stop()).toBe(0);
  }, 60_000);

  it('refuses a wrong setting with a message naming the variable', async () => {
    await expect(startBroker({ PORT: 'eighty' }, { timeoutMs: 15_000 })).rejects.toThrow(/PORT/);
  });

  it('says which setting to change when its port is taken', async () => {
    const adminUrl = inject('pgAdminUrl');
    const name = `omb_e2e_${randomBytes(6).toString('hex')}`;
    const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
    await admin.unsafe(`create database ${name} template ${inject('pgTemplate')}`);
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const port = (taken.address() as { port: number }).port;
    try {
      await expect(
        startBroker({ ...BROKER_ENV, DATABASE_URL: withDatabase(adminUrl, name), PORT: String(port) }, { timeoutMs: 30_000 }),
      ).rejects.toThrow(
        new RegExp(`exited with 1[\\s\\S]*PORT ${port} on HOST 127\\.0\\.0\\.1 is in use by another process; set PORT to a free port`),
      );
    } finally {
      await new Promise((resolve) => taken.close(resolve));
      await admin.unsafe(`drop database if exists ${name} with (force)`);
      await admin.end();
    }
  });
});
