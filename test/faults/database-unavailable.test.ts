import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, PING_FRESH_MS } from '../../src/db/database.js';
import { createLogger } from '../../src/logger.js';
import { buildTestApp, register, type TestApp } from '../support/app.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.js';
import { expectUnavailable, timedInject } from './unavailable.js';

/**
 * Postgres unreachable or frozen: every route answers `503 database_unavailable` with
 * `retry-after`, within about `DATABASE_TIMEOUT_MS`, never `500` and never a hang. The app
 * reaches its database through a proxy the test cuts (`down`) or freezes (`freeze`: the
 * connections stay open and nothing comes back, as with a stopped Postgres).
 */

const TIMEOUT_MS = 800;
let real: TestDatabase;
let proxy: TcpProxy;
let t: TestApp;
let auth: { authorization: string };

beforeAll(async () => {
  real = await createTestDatabase();
  const target = new URL(real.url);
  proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port) });
  target.port = String(proxy.port);
  const viaProxy = openDatabase({ url: target.toString(), poolSize: 4, logger: createLogger('silent'), timeoutMs: TIMEOUT_MS });
  t = await buildTestApp(
    { DATABASE_TIMEOUT_MS: String(TIMEOUT_MS), REGISTRATIONS_PER_MINUTE: '1000' },
    { database: { ...viaProxy, name: real.name, drop: async () => {} } },
  );
  ({ auth } = await register(t.app));
});
afterAll(async () => {
  proxy.thaw();
  await t?.close();
  await proxy?.close();
  await real?.drop();
});

describe('Postgres refusing connections', () => {
  it('answers 503 with retry-after on registration (a drizzle-wrapped error), /v1/me and /health', async () => {
    await proxy.down();
    try {
      // Registration goes through drizzle, which wraps the driver's error in its own.
      expectUnavailable((await timedInject(t.app, { method: 'POST', url: '/v1/installations', payload: {} })).response);
      expectUnavailable((await timedInject(t.app, { method: 'GET', url: '/v1/me', headers: auth })).response);
      expectUnavailable((await timedInject(t.app, { method: 'GET', url: '/health' })).response);
    } finally {
      await proxy.up();
    }
    expect((await t.app.inject({ method: 'GET', url: '/health' })).statusCode).toBe(200);
  });
});

describe('Postgres frozen', () => {
  it('answers 503 with retry-after within the database timeout, then recovers when it thaws', async () => {
    // Connections are open and idle in the pool: the queries are sent and nothing answers.
    expect((await t.app.inject({ method: 'GET', url: '/v1/me', headers: auth })).statusCode).toBe(200);
    proxy.freeze();
    try {
      // The last ping's answer stands for PING_FRESH_MS: past it, /health asks again.
      await new Promise((resolve) => setTimeout(resolve, PING_FRESH_MS));
      const answers = await Promise.all([
        timedInject(t.app, { method: 'GET', url: '/health' }),
        timedInject(t.app, { method: 'GET', url: '/v1/me', headers: auth }),
        timedInject(t.app, { method: 'POST', url: '/v1/installations', payload: {} }),
      ]);
      for (const { response, ms } of answers) {
        expectUnavailable(response);
        // The statement bound, a reconnect's connect bound, and slack for a busy machine.
        expect(ms).toBeLessThan(TIMEOUT_MS * 6 + 2_000);
      }
    } finally {
      proxy.thaw();
    }
    // New connections after the cut ones: the database is back for everyone.
    await expect
      .poll(async () => (await t.app.inject({ method: 'GET', url: '/v1/me', headers: auth })).statusCode, { timeout: 10_000 })
      .toBe(200);
  });
});

describe('Postgres that cannot write now', () => {
  it('answers a write 503 with retry-after, as a standby or a database being failed over does, still serves reads, and writes on a new connection once the server can', async () => {
    // Connections opened from now on are read-only, as on a hot standby an endpoint still points to.
    await real.sql.unsafe(`alter database ${real.name} set default_transaction_read_only = on`);
    const readOnly = openDatabase({ url: real.url, poolSize: 2, logger: createLogger('silent'), timeoutMs: TIMEOUT_MS });
    const standby = await buildTestApp(
      { DATABASE_TIMEOUT_MS: String(TIMEOUT_MS), REGISTRATIONS_PER_MINUTE: '1000' },
      { database: { ...readOnly, name: real.name, drop: async () => {} } },
    );
    try {
      expectUnavailable(await standby.app.inject({ method: 'POST', url: '/v1/installations', payload: {} }));
      expect((await standby.app.inject({ method: 'GET', url: '/health' })).statusCode).toBe(200);
      // The server can write again (the standby promoted, or the endpoint moved to the primary):
      // the connection that answered read-only was let go, and the next write takes a new one.
      await real.sql.unsafe(`alter database ${real.name} reset default_transaction_read_only`);
      for (let i = 0; i < 4; i++) {
        expect((await standby.app.inject({ method: 'POST', url: '/v1/installations', payload: {} })).statusCode).toBe(201);
      }
    } finally {
      await real.sql.unsafe(`alter database ${real.name} reset default_transaction_read_only`);
      await standby.close();
    }
  });
});
