import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { register } from '../../support/app.js';
import { createTestDatabase, type TestDatabase } from '../../support/database.js';
import { until } from '../../support/http.js';
import { buildEventsApp, countingStatements, type EventsTestApp, getEvents, insertTrigger, poll, sendAccepted } from '../helpers.js';

/**
 * Waiting costs nothing: once a process has served an installation, a poll that finds nothing —
 * the token check, the limit, the acknowledgement of an unchanged cursor, the wait and its end —
 * sends no statement to Postgres. Every statement the app sends through its pool is counted here
 * (the LISTEN connection's own heartbeat aside, which is per process, not per poll).
 */

let database: TestDatabase;
let t: EventsTestApp;
let counted: ReturnType<typeof countingStatements>;
/** Another process on the same database, whose statements are not counted. */
let other: EventsTestApp;

beforeAll(async () => {
  database = await createTestDatabase();
  counted = countingStatements(database.sql);
  t = await buildEventsApp(
    { REGISTRATIONS_PER_MINUTE: '1000', EVENT_REQUESTS_PER_MINUTE: '1000' },
    {
      database: { ...database, sql: counted.sql },
    },
  );
  other = await buildEventsApp({ REGISTRATIONS_PER_MINUTE: '1000' }, { database });
});
afterAll(async () => {
  await other?.close();
  await t?.close();
  await database?.drop();
});

/** The statements `work` sends. */
async function sentBy(work: () => Promise<unknown>): Promise<string[]> {
  counted.take();
  await work();
  return counted.take();
}

describe('an idle poll, once the process knows the installation', () => {
  it('sends no statement: wait=0, a whole wait with its cursor, and the acknowledgement of an unchanged cursor', async () => {
    const who = await register(t.app);
    // The first poll looks the token up and reads the queue: the process learns both.
    const first = await sentBy(() => poll(t, who.auth));
    expect(first.length).toBe(2);
    const { cursor } = await poll(t, who.auth);

    expect(await sentBy(() => poll(t, who.auth))).toEqual([]);
    expect(await sentBy(() => poll(t, who.auth, { cursor }))).toEqual([]);
    // A wait that ends with nothing heard answers without reading again.
    const waited = await sentBy(async () => {
      const started = performance.now();
      expect(await poll(t, who.auth, { cursor, wait: 1 })).toEqual({ events: [], cursor });
      expect(performance.now() - started).toBeGreaterThanOrEqual(950);
    });
    expect(waited).toEqual([]);
    const acked = await sentBy(async () => {
      const answer = await t.app.inject({ method: 'POST', url: '/v1/events/ack', headers: who.auth, payload: { cursor } });
      expect(answer.statusCode).toBe(204);
    });
    expect(acked).toEqual([]);
  });

  it('writes an acknowledgement that moves the cursor once, then reads nothing at the new head', async () => {
    const who = await register(t.app);
    const trigger = await insertTrigger(t.database, who.installationId);
    const { cursor: start } = await poll(t, who.auth);
    // Ingested by the other process: this one hears the append once, and its held poll answering
    // says it has (an append ingested here would also be heard again, a moment later, from its
    // own announcement, which drops what a read learnt in between and costs one read more).
    const waiting = getEvents(t, who.auth, { cursor: start, wait: 10 });
    await until(() => t.events.hub.size === 1);
    counted.take();
    const id = await sendAccepted(other, trigger);
    const woken = await waiting;
    expect(woken.json().events.map((e: { id: string }) => e.id)).toEqual([id]);
    // The append dropped what the process knew of the queue's head: the woken poll read, once.
    expect(counted.take().filter((s) => s.includes('omb_read_queue')).length).toBe(1);
    const { cursor } = woken.json();

    const moved = await sentBy(() => poll(t, who.auth, { cursor }));
    expect(moved.length).toBe(1);
    expect(moved[0]).toMatch(/update installations i set acked_event_position/);
    expect(await sentBy(() => poll(t, who.auth, { cursor }))).toEqual([]);
    expect(await sentBy(() => poll(t, who.auth))).toEqual([]);
  });

  it('is woken once by an event its own process ingested, reads it once, and is at the head again after it', async () => {
    const who = await register(t.app);
    const trigger = await insertTrigger(t.database, who.installationId);
    const { cursor } = await poll(t, who.auth);
    let id = '';
    let woken: Awaited<ReturnType<typeof getEvents>> | undefined;
    const wakes = vi.spyOn(t.events.hub, 'wake');
    const held = await sentBy(async () => {
      const waiting = getEvents(t, who.auth, { cursor, wait: 10 });
      await until(() => t.events.hub.size === 1);
      id = await sendAccepted(t, trigger);
      woken = await waiting;
    });
    expect(woken?.statusCode).toBe(200);
    expect(woken?.json().events.map((e: { id: string }) => e.id)).toEqual([id]);
    expect(held.filter((s) => s.includes('omb_read_queue')).length).toBe(1);
    // Once the announcement is surely heard (a second installation's, sent after it), one wake.
    const second = await register(t.app);
    await sendAccepted(t, await insertTrigger(t.database, second.installationId));
    await until(() => wakes.mock.calls.some(([installation]) => installation === second.installationId));
    expect(wakes.mock.calls.filter(([installation]) => installation === who.installationId).length).toBe(1);
    wakes.mockRestore();
    // The announcement the ingest sent is heard by this process too; it woke the poll, and does
    // not make the next poll read again what the woken one read.
    const after = await sentBy(() => poll(t, who.auth, { cursor: woken?.json().cursor }));
    expect(after.filter((s) => s.includes('omb_read_queue'))).toEqual([]);
  });

  it('reads again, once, after an event for it was heard while nothing waited', async () => {
    const who = await register(t.app);
    const trigger = await insertTrigger(t.database, who.installationId);
    const { cursor } = await poll(t, who.auth);
    expect(await sentBy(() => poll(t, who.auth, { cursor }))).toEqual([]);
    const id = await sendAccepted(t, trigger);
    const after = await sentBy(async () => {
      expect((await poll(t, who.auth, { cursor })).events.map((e) => e.id)).toEqual([id]);
    });
    expect(after.filter((s) => s.includes('omb_read_queue')).length).toBe(1);
  });
});
