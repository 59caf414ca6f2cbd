import type { Logger } from 'pino';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { reconnectBackoff } from '../../../src/db/database.js';
import { EventHub } from '../../../src/events/queue/hub.js';
import { type ListenClientOptions, NotificationListener } from '../../../src/events/queue/listener.js';
import { listenForQueue } from '../../../src/events/queue/runtime.js';
import { createLogger } from '../../../src/logger.js';
import { LogCapture } from '../../support/app.js';
import { createTestDatabase, type TestDatabase } from '../../support/database.js';
import { until } from '../../support/http.js';
import { startTcpProxy, type TcpProxy } from '../../support/tcp-proxy.js';
import { waitIn } from '../helpers.js';

let database: TestDatabase;
let admin: postgres.Sql;
beforeAll(async () => {
  database = await createTestDatabase();
  admin = postgres(inject('pgAdminUrl'), { max: 1, onnotice: () => {} });
});
afterAll(async () => {
  await admin.end();
  await database.drop();
});

/** The process's listener as the queue sets it up: its wake-ups, and all waiters after a reconnect. */
function queueListener(
  connect: (listening: ListenClientOptions) => postgres.Sql,
  hub: EventHub,
  log: Logger,
  heartbeatMs: number,
): NotificationListener {
  const listener = new NotificationListener(database.sql, connect, log, heartbeatMs);
  listenForQueue(listener, hub, log);
  return listener;
}

describe('the event listener', () => {
  it('listens again within about a second once Postgres accepts again, trying on a short backoff meanwhile', async () => {
    const hub = new EventHub();
    const logs = new LogCapture();
    let attempts = 0;
    const connect = (listening: ListenClientOptions) => {
      attempts++;
      return postgres(database.url, { ...listening, onnotice: () => {} });
    };
    // No heartbeat during the test: the connection's closing alone sets the listener to work.
    const listener = queueListener(connect, hub, createLogger('debug', logs), 60_000);
    await listener.start();
    try {
      // Keep pool connections open: new ones are about to be refused.
      await Promise.all(Array.from({ length: 4 }, () => database.sql`select pg_sleep(0.01)`));
      await admin.unsafe(`alter database ${database.name} allow_connections false`);
      await database.sql`select pg_terminate_backend(pid) from pg_stat_activity
                         where datname = current_database() and query ilike 'listen%' and pid <> pg_backend_pid()`;
      const waiting = waitIn(hub, 'installation-a', 10_000);
      await new Promise((resolve) => setTimeout(resolve, 2_500));
      const refused = attempts - 1;
      await admin.unsafe(`alter database ${database.name} allow_connections true`);

      const started = performance.now();
      expect(await waiting.woken).toBe('event');
      expect(performance.now() - started).toBeLessThan(2_000);
      // At once, after 250 ms, 500 ms, then every second: no storm against a refusing Postgres.
      expect(refused).toBeGreaterThanOrEqual(3);
      expect(refused).toBeLessThanOrEqual(6);

      // And notifications arrive again.
      const next = waitIn(hub, 'installation-b', 5_000);
      await database.sql`select pg_notify('omb_events', 'installation-b')`;
      expect(await next.woken).toBe('event');
      // Said once each, whatever the number of attempts (which are logged at debug only).
      const said = (pattern: RegExp) => logs.lines.filter((line) => pattern.test(line) && !line.includes('"level":20')).length;
      expect(said(/event listener lost its connection/)).toBe(1);
      expect(said(/event listener listening again after \d+ ms/)).toBe(1);
      expect(said(/waking every waiting poll/)).toBe(1);
      expect(said(/could not listen yet/)).toBe(0);
      // Every attempt but the first (at start) and the last (listening again) was refused.
      expect(logs.lines.filter((line) => line.includes('could not listen yet')).length).toBe(attempts - 2);
    } finally {
      await admin.unsafe(`alter database ${database.name} allow_connections true`);
      await listener.stop();
    }
  });

  it('replaces a connection that stops delivering without closing, once it misses its heartbeat', async () => {
    const hub = new EventHub();
    const logs = new LogCapture();
    const proxy = await startTcpProxy({ host: new URL(database.url).hostname, port: Number(new URL(database.url).port) });
    const viaProxy = new URL(database.url);
    viaProxy.port = String(proxy.port);
    const connect = (listening: ListenClientOptions) => postgres(viaProxy.toString(), { ...listening, onnotice: () => {} });
    const listener = queueListener(connect, hub, createLogger('info', logs), 300);
    await listener.start();
    try {
      const waiting = waitIn(hub, 'installation-e', 10_000);
      proxy.freeze();
      await until(() => logs.text.includes('missed its heartbeat'), 5_000, 'the missed heartbeat noticed');
      proxy.thaw();
      expect(await waiting.woken).toBe('event');
      await until(() => logs.text.includes('listening again after'), 5_000, 'listening again');

      const next = waitIn(hub, 'installation-f', 5_000);
      await database.sql`select pg_notify('omb_events', 'installation-f')`;
      expect(await next.woken).toBe('event');
    } finally {
      await listener.stop();
      await proxy.close();
    }
  });

  it('sends a heartbeat the pool could not send again within a second, and checks it soon once sent', async () => {
    const hub = new EventHub();
    const logs = new LogCapture();
    const target = { host: new URL(database.url).hostname, port: Number(new URL(database.url).port) };
    const [toPool, toListener] = await Promise.all([startTcpProxy(target), startTcpProxy(target)]);
    const via = (proxy: TcpProxy) => Object.assign(new URL(database.url), { port: String(proxy.port) }).toString();
    const pool = postgres(via(toPool), { max: 1, onnotice: () => {}, backoff: reconnectBackoff });
    const connect = (listening: ListenClientOptions) => postgres(via(toListener), { ...listening, onnotice: () => {} });
    const listener = new NotificationListener(pool, connect, createLogger('info', logs), 4_000);
    listenForQueue(listener, hub, createLogger('silent'));
    await listener.start();
    try {
      // The pool cannot reach Postgres, and the listening connection goes silent without closing.
      await toPool.down();
      toListener.freeze();
      await until(() => logs.text.includes('heartbeat failed'), 10_000, 'a heartbeat failing');
      await toPool.up();
      const upAt = performance.now();
      // Sent again within half a second, and found missing a second later: not two beats later.
      await until(() => logs.text.includes('missed its heartbeat'), 10_000, 'the missed heartbeat noticed');
      expect(performance.now() - upAt).toBeLessThan(2_500);
      expect(logs.text.match(/heartbeat failed/g)?.length).toBe(1);

      toListener.thaw();
      await until(() => logs.text.includes('listening again after'), 5_000, 'listening again');
      const next = waitIn(hub, 'installation-g', 5_000);
      await database.sql`select pg_notify('omb_events', 'installation-g')`;
      expect(await next.woken).toBe('event');
    } finally {
      await listener.stop();
      await pool.end({ timeout: 0 });
      await Promise.all([toPool.close(), toListener.close()]);
    }
  });

  it('holds one connection, wakes waiters when it reconnects, and closes it on stop', async () => {
    const hub = new EventHub();
    const connect = (listening: ListenClientOptions) =>
      postgres(database.url, { ...listening, onnotice: () => {}, connection: { application_name: 'omb-listen-test' } });
    const listener = queueListener(connect, hub, createLogger('silent'), 60_000);
    const listeners = async () => {
      const [row] = await database.sql<{ n: number }[]>`
        select count(*)::int as n from pg_stat_activity where datname = current_database() and application_name = 'omb-listen-test'`;
      return row!.n;
    };
    await listener.start();
    expect(await listeners()).toBe(1);

    const woken = waitIn(hub, 'installation-c', 10_000);
    await database.sql`select pg_terminate_backend(pid) from pg_stat_activity
                       where datname = current_database() and application_name = 'omb-listen-test'`;
    expect(await woken.woken).toBe('event');

    const notified = waitIn(hub, 'installation-d', 5_000);
    await new Promise((resolve) => setTimeout(resolve, 200));
    await database.sql`select pg_notify('omb_events', 'installation-d')`;
    expect(await notified.woken).toBe('event');
    expect(await listeners()).toBe(1);

    await listener.stop();
    const deadline = Date.now() + 2_000;
    while ((await listeners()) > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(await listeners()).toBe(0);
  });

  it('hands each registered channel its notifications, and refuses a channel registered once listening', async () => {
    const connect = (listening: ListenClientOptions) => postgres(database.url, { ...listening, onnotice: () => {} });
    const listener = new NotificationListener(database.sql, connect, createLogger('silent'), 60_000);
    const heard: string[] = [];
    listener.on('omb_listener_test_a', (payload) => heard.push(`a:${payload}`));
    listener.on('omb_listener_test_a', (payload) => heard.push(`a2:${payload}`));
    listener.on('omb_listener_test_b', (payload) => heard.push(`b:${payload}`));
    await listener.start();
    try {
      expect(() => listener.on('omb_listener_test_c', () => {})).toThrow(/before start/);
      await database.sql`select pg_notify('omb_listener_test_b', 'one'), pg_notify('omb_listener_test_a', 'two')`;
      const deadline = Date.now() + 5_000;
      while (heard.length < 3 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
      expect(heard.sort()).toEqual(['a2:two', 'a:two', 'b:one']);
    } finally {
      await listener.stop();
    }
  });
});
