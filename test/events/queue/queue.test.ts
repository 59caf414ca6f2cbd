import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { quotaExceededEventId } from '../../../src/events/broker-events.js';
import { encodeCursor } from '../../../src/events/queue/cursor.js';
import { quotaDay } from '../../../src/plans/plan.js';
import { register } from '../../support/app.js';
import { until } from '../../support/http.js';
import {
  type Batch,
  buildEventsApp,
  type EventsTestApp,
  getEvents,
  insertTrigger,
  poll,
  sendAccepted,
  type TestTrigger,
  triggerMessage,
} from '../helpers.js';

let t: EventsTestApp;
beforeAll(async () => {
  t = await buildEventsApp();
});
afterAll(() => t.close());

async function setup(events = 0) {
  const owner = await register(t.app);
  const trigger = await insertTrigger(t.database, owner.installationId);
  const ids: string[] = [];
  for (let i = 0; i < events; i++) ids.push(await sendAccepted(t, trigger, { n: i }));
  return { ...owner, trigger, ids };
}

describe('GET /v1/events', () => {
  it('returns events in the order they were accepted, `limit` at a time, and the cursor acknowledges', async () => {
    const { auth, ids } = await setup(5);
    const first = await poll(t, auth, { limit: 2 });
    expect(first.events.map((e) => e.id)).toEqual(ids.slice(0, 2));
    expect(first.gap).toBeUndefined();

    // Without a cursor nothing was acknowledged yet: the same two again.
    expect((await poll(t, auth, { limit: 2 })).events.map((e) => e.id)).toEqual(ids.slice(0, 2));

    const second = await poll(t, auth, { cursor: first.cursor, limit: 2 });
    expect(second.events.map((e) => e.id)).toEqual(ids.slice(2, 4));
    // Now the first two are acknowledged: a poll without cursor starts after them.
    expect((await poll(t, auth, { limit: 10 })).events.map((e) => e.id)).toEqual(ids.slice(2));

    const third = await poll(t, auth, { cursor: second.cursor });
    expect(third.events.map((e) => e.id)).toEqual(ids.slice(4));
    const empty = await poll(t, auth, { cursor: third.cursor });
    expect(empty).toEqual({ events: [], cursor: third.cursor });
  });

  it('defaults to 50 events a poll', async () => {
    const { auth } = await setup(55);
    expect((await poll(t, auth)).events).toHaveLength(50);
  });

  it('replays from an older cursor without moving the acknowledgement back', async () => {
    const { auth, ids, installationId } = await setup(3);
    const first = await poll(t, auth, { limit: 1 });
    const rest = await poll(t, auth, { cursor: first.cursor });
    await poll(t, auth, { cursor: rest.cursor });
    const replay = await poll(t, auth, { cursor: first.cursor });
    expect(replay.events.map((e) => e.id)).toEqual(ids.slice(1));
    const [row] = await t.database.sql`select acked_event_position::int as acked from installations where id = ${installationId}`;
    expect(row!.acked).toBe(3);
    expect((await poll(t, auth)).events).toEqual([]);
  });

  it.each([
    ['garbage', 'not-a-cursor'],
    ['a truncated cursor', 'AAAAAAAAAAAAAAAAAAAAA'],
    ['a cursor with a flipped bit', null],
  ])('answers %s with 400 invalid_cursor', async (_name, cursor) => {
    const { auth, installationId } = await setup(1);
    const value = cursor ?? flipLastChar(encodeCursor(installationId, 1));
    const response = await getEvents(t, auth, { cursor: value });
    expect(response.statusCode).toBe(400);
    expect(response.json()).toMatchObject({ code: 'invalid_cursor' });
  });

  it('answers a cursor past the end of the queue with 400', async () => {
    const { auth, installationId } = await setup(2);
    const response = await getEvents(t, auth, { cursor: encodeCursor(installationId, 3) });
    expect(response.statusCode).toBe(400);
    expect(response.json()).toMatchObject({ code: 'invalid_cursor' });
  });

  it.each([
    ['limit', '0'],
    ['limit', '101'],
    ['limit', 'ten'],
    ['wait', '26'],
    ['wait', '-1'],
    ['wait', '1.5'],
  ])('answers %s=%s with 400 naming the field', async (name, value) => {
    const { auth } = await setup();
    const response = await getEvents(t, auth, { [name]: value });
    expect(response.statusCode).toBe(400);
    expect(response.json().error).toContain(`query.${name}`);
  });

  it('needs an installation token', async () => {
    const response = await t.app.inject({ method: 'GET', url: '/v1/events?wait=0' });
    expect(response.statusCode).toBe(401);
    expect(response.json()).toEqual({ error: expect.any(String), code: 'unauthorized' });
  });
});

describe('POST /v1/events/ack', () => {
  it('acknowledges without polling', async () => {
    const { auth, ids } = await setup(3);
    const first = await poll(t, auth, { limit: 2 });
    const ack = await t.app.inject({ method: 'POST', url: '/v1/events/ack', headers: auth, payload: { cursor: first.cursor } });
    expect(ack.statusCode).toBe(204);
    expect((await poll(t, auth)).events.map((e) => e.id)).toEqual(ids.slice(2));
  });

  it.each([
    ['no cursor', {}],
    ['an unknown field', { cursor: 'x', extra: 1 }],
    ['a number', { cursor: 5 }],
    ['garbage', { cursor: 'garbage' }],
  ])('answers %s with 400', async (_name, payload) => {
    const { auth } = await setup(1);
    const response = await t.app.inject({ method: 'POST', url: '/v1/events/ack', headers: auth, payload });
    expect(response.statusCode).toBe(400);
  });
});

describe('isolation between installations', () => {
  it('never shows, acknowledges or accepts the cursors of another installation', async () => {
    const a = await setup(3);
    const b = await setup(3);
    const fromA = await poll(t, a.auth);
    const fromB = await poll(t, b.auth);
    expect(fromA.events.map((e) => e.id)).toEqual(a.ids);
    expect(fromB.events.map((e) => e.id)).toEqual(b.ids);

    // B's cursor is refused on A's queue, in a poll and in an ack, and moves nothing.
    expect((await getEvents(t, a.auth, { cursor: fromB.cursor })).statusCode).toBe(400);
    const ack = await t.app.inject({ method: 'POST', url: '/v1/events/ack', headers: a.auth, payload: { cursor: fromB.cursor } });
    expect(ack.statusCode).toBe(400);
    // A cursor for B's installation made up by A (same position) is still A-only.
    expect((await getEvents(t, a.auth, { cursor: encodeCursor(b.installationId, 1) })).statusCode).toBe(400);

    const rows = await t.database.sql<{ id: string; acked: number }[]>`
      select id, acked_event_position::int as acked from installations where id in (${a.installationId}, ${b.installationId})`;
    expect(rows.every((r) => r.acked === 0)).toBe(true);
    expect((await poll(t, b.auth)).events.map((e) => e.id)).toEqual(b.ids);
  });
});

describe('the long poll', () => {
  it('answers within milliseconds of a commit for the installation', async () => {
    const { auth, trigger } = await setup();
    const started = performance.now();
    const waiting = getEvents(t, auth, { wait: 10 });
    await until(() => t.events.hub.size === 1, 5_000);
    const sentAt = performance.now();
    const id = await sendAccepted(t, trigger, { hello: 'world' });
    const response = await waiting;
    const answeredAfter = performance.now() - sentAt;
    expect(response.json<Batch>().events.map((e) => e.id)).toEqual([id]);
    expect(answeredAfter).toBeLessThan(500);
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(t.events.hub.size).toBe(0);
  });

  it('is not woken by another installation’s events', async () => {
    const a = await setup();
    const b = await setup();
    const waiting = getEvents(t, a.auth, { wait: 1 });
    await until(() => t.events.hub.size === 1, 5_000);
    await sendAccepted(t, b.trigger);
    const started = performance.now();
    const response = await waiting;
    expect(response.json<Batch>().events).toEqual([]);
    expect(performance.now() - started).toBeGreaterThan(500);
  });

  it('answers an empty batch with the same cursor when the wait ends', async () => {
    const { auth, installationId } = await setup(1);
    const first = await poll(t, auth);
    const started = performance.now();
    const response = await poll(t, auth, { cursor: first.cursor, wait: 1 });
    expect(performance.now() - started).toBeGreaterThanOrEqual(950);
    expect(response).toEqual({ events: [], cursor: encodeCursor(installationId, 1) });
  });

  it('is shortened to POLL_MAX_WAIT_SECONDS', async () => {
    const short = await buildEventsApp({ POLL_MAX_WAIT_SECONDS: '1' }, { database: t.database });
    try {
      const owner = await register(short.app);
      const started = performance.now();
      const response = await getEvents(short, owner.auth, { wait: 25 });
      expect(response.statusCode).toBe(200);
      expect(performance.now() - started).toBeLessThan(3_000);
    } finally {
      await short.close();
    }
  });

  it('ends with 403 installation_disabled at once when an operator disables the installation', async () => {
    const { auth, installationId } = await setup();
    const waiting = getEvents(t, auth, { wait: 20 });
    await until(() => t.events.hub.size === 1, 5_000);
    const started = performance.now();
    await t.database.sql.begin(async (tx) => {
      await tx`update installations set disabled_at = now() where id = ${installationId}`;
      await tx`select pg_notify('omb_installation_disabled', ${installationId})`;
    });
    const response = await waiting;
    expect(response.statusCode).toBe(403);
    expect(response.json()).toMatchObject({ code: 'installation_disabled' });
    expect(performance.now() - started).toBeLessThan(2_000);
  });
});

describe('across broker processes (two apps on one database)', () => {
  it('a poll held by one broker answers within milliseconds of a webhook accepted by the other', async () => {
    const other = await buildEventsApp({}, { database: t.database });
    try {
      const { auth, trigger } = await setup();
      const waiting = getEvents(other, auth, { wait: 10 });
      await until(() => other.events.hub.size === 1, 5_000);
      const sentAt = performance.now();
      const id = await sendAccepted(t, trigger);
      const response = await waiting;
      expect(response.json<Batch>().events.map((e) => e.id)).toEqual([id]);
      expect(performance.now() - sentAt).toBeLessThan(500);
    } finally {
      await other.close();
    }
  });

  it('waiters re-read after the LISTEN connection is dropped and comes back', async () => {
    const other = await buildEventsApp({}, { database: t.database });
    try {
      const { auth, trigger, installationId } = await setup();
      const waiting = getEvents(other, auth, { wait: 20 });
      await until(() => other.events.hub.size === 1, 5_000);
      // An event committed while the other broker is not listening: no notification reaches it.
      await t.database.sql`select pg_terminate_backend(pid) from pg_stat_activity
                           where datname = current_database() and query ilike 'listen%' and pid <> pg_backend_pid()`;
      const id = await sendWithoutNotify(trigger, installationId);
      const started = performance.now();
      const response = await waiting;
      // Reconnecting wakes every waiter, which reads the database again and finds the event.
      expect(response.json<Batch>().events.map((e) => e.id)).toEqual([id]);
      expect(performance.now() - started).toBeLessThan(5_000);
    } finally {
      await other.close();
    }
  });
});

describe('shutdown', () => {
  it('answers every waiting poll at once with an empty batch and `connection: close`', async () => {
    const closing = await buildEventsApp({}, { database: t.database });
    const owners = await Promise.all([register(closing.app), register(closing.app), register(closing.app)]);
    const waiting = owners.map((o) => getEvents(closing, o.auth, { wait: 25 }));
    await until(() => closing.events.hub.size === 3, 5_000);
    const started = performance.now();
    await closing.close();
    const responses = await Promise.all(waiting);
    expect(performance.now() - started).toBeLessThan(2_000);
    for (const response of responses) {
      expect(response.statusCode).toBe(200);
      expect(response.json().events).toEqual([]);
      expect(response.headers.connection).toBe('close');
    }
  });
});

/** Appends through the ingest function only, so no broker process is told (simulates a lost notification). */
async function sendWithoutNotify(trigger: TestTrigger, installationId: string): Promise<string> {
  const message = triggerMessage(trigger, {});
  const id = `msg_silent_${Date.now()}`;
  const at = new Date();
  const { day, resetsAt } = quotaDay(at);
  const [row] = await t.database.sql<{ outcome: string; installation: string }[]>`
    select * from omb_ingest_trigger_alone(${id}, ${trigger.composioTriggerId}, ${trigger.composioUserId},
      ${JSON.stringify(message.data)}::text::jsonb, ${at.toISOString()}::timestamptz, ${day}::date, ${resetsAt.toISOString()},
      ${quotaExceededEventId(day)}, 500, 500)`;
  expect(row).toMatchObject({ outcome: 'accepted', installation: installationId });
  return id;
}

function flipLastChar(cursor: string): string {
  const last = cursor.at(-1) === 'A' ? 'B' : 'A';
  return cursor.slice(0, -1) + last;
}
