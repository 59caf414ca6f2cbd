import type { Logger } from 'pino';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { EventHub } from '../../src/queue/hub.js';
import { NotificationListener } from '../../src/queue/listener.js';
import { listenForQueue } from '../../src/queue/runtime.js';
import { LogCapture } from '../support/app.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { waitIn } from './helpers.js';

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
function queueListener(connect: () => postgres.Sql, hub: EventHub, log: Logger, heartbeatMs: number): NotificationListener {
  const listener = new NotificationListener(database.sql, connect, log, heartbeatMs);
  listenForQueue(listener, hub, log);
  return listener;
}

describe('the event listener', () => {
  it('listens again by itself after Postgres refused its reconnect, and wakes every waiter', async () => {
    const hub = new EventHub();
    const logs = new LogCapture();
    const connect = () => postgres(database.url, { max: 1, onnotice: () => {} });
    const listener = queueListener(connect, hub, createLogger('info', logs), 200);
    await listener.start();
    try {
      // Keep pool connections open: new ones are about to be refused.
      await Promise.all(Array.from({ length: 4 }, () => database.sql`select pg_sleep(0.01)`));
      await admin.unsafe(`alter database ${database.name} allow_connections false`);
      await database.sql`select pg_terminate_backend(pid) from pg_stat_activity
                         where datname = current_database() and query ilike 'listen%' and pid <> pg_backend_pid()`;
      await new Promise((resolve) => setTimeout(resolve, 600));
      const waiting = waitIn(hub, 'installation-a', 10_000);
      await admin.unsafe(`alter database ${database.name} allow_connections true`);

      const started = performance.now();
      expect(await waiting.woken).toBe('event');
      expect(performance.now() - started).toBeLessThan(3_000);

      // And notifications arrive again.
      const next = waitIn(hub, 'installation-b', 5_000);
      await new Promise((resolve) => setTimeout(resolve, 300));
      await database.sql`select pg_notify('omb_events', 'installation-b')`;
      expect(await next.woken).toBe('event');
      expect(logs.text).toContain('missed its heartbeat');
      expect(logs.text.match(/waking every waiting poll/g)?.length ?? 0).toBeLessThanOrEqual(2);
    } finally {
      await admin.unsafe(`alter database ${database.name} allow_connections true`);
      await listener.stop();
    }
  });

  it('holds one connection, wakes waiters when it reconnects, and closes it on stop', async () => {
    const hub = new EventHub();
    const connect = () => postgres(database.url, { max: 1, onnotice: () => {}, connection: { application_name: 'omb-listen-test' } });
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
    const connect = () => postgres(database.url, { max: 1, onnotice: () => {} });
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
