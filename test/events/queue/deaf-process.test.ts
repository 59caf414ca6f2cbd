import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { APPLICATION_NAMES } from '../../../src/db/database.js';
import { register } from '../../support/app.js';
import { createTestDatabase, type TestDatabase } from '../../support/database.js';
import { until } from '../../support/http.js';
import { buildEventsApp, countingStatements, type EventsTestApp, getEvents, insertTrigger, poll, sendAccepted } from '../helpers.js';

/**
 * Two processes on one database, `t` under test and `other`. Both lose their LISTEN connection
 * and Postgres refuses a new one, while their pools' open connections still serve: neither hears
 * what the other announces. `t` then trusts nothing it knew — a token removed meanwhile is `401`,
 * a queue another process appended to is read — and once it hears again, the polls it held across
 * the outage are brought up to date with ONE statement for all of them: the one whose queue grew
 * reads it, the one at its head goes on waiting without a read.
 */

let database: TestDatabase;
let admin: postgres.Sql;
let counted: ReturnType<typeof countingStatements>;
let t: EventsTestApp;
let other: EventsTestApp;

const env = { REGISTRATIONS_PER_MINUTE: '1000', EVENT_REQUESTS_PER_MINUTE: '1000' };

beforeAll(async () => {
  database = await createTestDatabase();
  admin = postgres(inject('pgAdminUrl'), { max: 1, onnotice: () => {} });
  counted = countingStatements(database.sql);
  t = await buildEventsApp(env, { database: { ...database, sql: counted.sql } });
  other = await buildEventsApp(env, { database });
});
afterAll(async () => {
  await admin?.unsafe(`alter database ${database.name} allow_connections true`);
  await Promise.all([t?.close(), other?.close()]);
  await admin?.end();
  await database?.drop();
});

describe('a process that cannot hear the others', () => {
  it('trusts nothing it knew, and brings the polls it held up to date in one statement once it hears again', async () => {
    const [stays, removed, grows, idle] = [await register(t.app), await register(t.app), await register(t.app), await register(t.app)];
    const staysTrigger = await insertTrigger(database, stays.installationId);
    const growsTrigger = await insertTrigger(database, grows.installationId);
    // `t` learns each token and where each queue stands.
    const cursors = await Promise.all([stays, removed, grows, idle].map(async (who) => (await poll(t, who.auth)).cursor));
    const [staysAt, , growsAt, idleAt] = cursors;
    counted.take();
    expect((await poll(t, stays.auth, { cursor: staysAt! })).events).toEqual([]);
    expect((await getEvents(t, removed.auth)).statusCode).toBe(200);
    expect(counted.take()).toEqual([]);

    const growing = getEvents(t, grows.auth, { cursor: growsAt!, wait: 20 });
    const waiting = getEvents(t, idle.auth, { cursor: idleAt!, wait: 20 });
    await until(() => t.events.hub.size === 2, 5_000, 'two polls waiting on t');

    // Keep the pool's connections open: new ones are about to be refused, and so is listening again.
    await Promise.all(Array.from({ length: 8 }, () => database.sql`select pg_sleep(0.05)`));
    await admin.unsafe(`alter database ${database.name} allow_connections false`);
    await database.sql`select pg_terminate_backend(pid) from pg_stat_activity
                        where datname = current_database() and application_name = ${APPLICATION_NAMES.listen}`;
    await until(() => t.events.listener.epoch === null && other.events.listener.epoch === null, 5_000, 'both deaf');

    // What `t` cannot hear: another process appends to two queues and an installation is removed.
    const forStays = await sendAccepted(other, staysTrigger);
    const forGrows = await sendAccepted(other, growsTrigger);
    await database.sql`delete from installations where id = ${removed.installationId}`;

    // `t` asks the database rather than what it knew.
    expect((await getEvents(t, removed.auth)).statusCode).toBe(401);
    expect((await poll(t, stays.auth, { cursor: staysAt! })).events.map((e) => e.id)).toEqual([forStays]);
    expect(t.events.hub.size).toBe(2);

    counted.take();
    await admin.unsafe(`alter database ${database.name} allow_connections true`);
    const grown = await growing;
    expect(grown.statusCode).toBe(200);
    expect(grown.json().events.map((e: { id: string }) => e.id)).toEqual([forGrows]);
    await until(() => t.events.listener.epoch !== null, 5_000, 't hears again');
    // Every held poll has looked again by now (the one that grew has answered).
    await new Promise((resolve) => setTimeout(resolve, 200));
    const sent = counted.take();
    expect(sent.filter((s) => s.includes('from installations where id = any(')).length).toBe(1);
    expect(sent.filter((s) => s.includes('omb_read_queue')).length).toBe(1);
    expect(t.events.hub.size).toBe(1);

    // The one at its head still waits, and is woken by the next event.
    const idleTrigger = await insertTrigger(database, idle.installationId);
    const forIdle = await sendAccepted(other, idleTrigger);
    const woken = await waiting;
    expect(woken.json().events.map((e: { id: string }) => e.id)).toEqual([forIdle]);
  }, 30_000);
});
