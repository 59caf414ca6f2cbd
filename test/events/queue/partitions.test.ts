import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dropExpiredDays, ensureEventPartitions, removeExpiredEvents } from '../../../src/events/retention/retention.js';
import { register } from '../../support/app.js';
import { buildEventsApp, type EventsTestApp, insertTrigger, poll, send, sendAccepted, type TestTrigger } from '../helpers.js';

/**
 * The queue's storage at scale: one partition per UTC day, retention by dropping whole days,
 * dedupe within an installation, gaps told from contiguous positions, and broker-made ids apart
 * from webhook ids.
 */
const DAY = 86_400_000;
let t: EventsTestApp;
beforeAll(async () => {
  t = await buildEventsApp({ QUOTA_STANDARD: '3' });
});
afterAll(() => t.close());

async function partitionOf(installationId: string, id: string): Promise<string> {
  const [row] = await t.database.sql<{ partition: string }[]>`
    select tableoid::regclass::text as partition from events where installation_id = ${installationId} and id = ${id}`;
  return row!.partition;
}

const exists = async (table: string) =>
  (await t.database.sql<{ found: boolean }[]>`select to_regclass(${table}) is not null as found`)[0]!.found;

describe('day partitions', () => {
  it('are created ahead by the broker, and each event lands in its day’s', async () => {
    t.clock.set('2033-01-10T08:00:00.000Z');
    expect(await ensureEventPartitions(t.database.sql, t.clock.now())).toBe(4);
    expect(await ensureEventPartitions(t.database.sql, t.clock.now())).toBe(0);
    for (const day of ['20330110', '20330111', '20330112', '20330113']) expect(await exists(`events_p${day}`)).toBe(true);

    const owner = await register(t.app);
    const trigger = await insertTrigger(t.database, owner.installationId);
    const first = await send(t, trigger);
    t.clock.set('2033-01-11T00:00:00.000Z');
    const second = await send(t, trigger);
    expect(await partitionOf(owner.installationId, first.id)).toBe('events_p20330110');
    expect(await partitionOf(owner.installationId, second.id)).toBe('events_p20330111');
  });

  it('take over the events that waited in the default partition for their day', async () => {
    t.clock.set('2033-02-01T12:00:00.000Z');
    const owner = await register(t.app);
    const trigger = await insertTrigger(t.database, owner.installationId);
    const early = await send(t, trigger);
    expect(await partitionOf(owner.installationId, early.id)).toBe('events_default');
    await ensureEventPartitions(t.database.sql, t.clock.now());
    expect(await partitionOf(owner.installationId, early.id)).toBe('events_p20330201');
    expect((await poll(t, owner.auth, { limit: 100 })).events.map((e) => e.id)).toEqual([early.id]);
  });

  it('are dropped whole once past the horizon, no row deleted one by one, and a poll says `gap`', async () => {
    t.clock.set('2033-03-01T09:00:00.000Z');
    await ensureEventPartitions(t.database.sql, t.clock.now());
    const owner = await register(t.app);
    const trigger = await insertTrigger(t.database, owner.installationId);
    const old = [await send(t, trigger), await send(t, trigger)];
    const firstPoll = await poll(t, owner.auth, { limit: 1 });
    expect(firstPoll.events.map((e) => e.id)).toEqual([old[0]!.id]);
    t.clock.set('2033-03-02T09:00:00.000Z');
    const kept = await send(t, trigger);

    t.clock.set('2033-03-09T00:00:01.000Z');
    const horizon = new Date(t.clock.now().getTime() - 7 * DAY);
    expect(await removeExpiredEvents(t.database.sql, { horizon })).toEqual({ ran: true, removed: 0 });
    const dropped = await dropExpiredDays(t.database.sql, horizon);
    expect(dropped.ran).toBe(true);
    expect(dropped.days).toContain('2033-03-01');
    expect(dropped.days).not.toContain('2033-03-02');
    expect(await exists('events_p20330301')).toBe(false);
    expect(await exists('events_p20330302')).toBe(true);

    // From the first cursor and from the last acknowledged position alike.
    expect(await poll(t, owner.auth, { cursor: firstPoll.cursor, limit: 100 })).toMatchObject({ events: [{ id: kept.id }], gap: true });
    const after = await poll(t, owner.auth, { limit: 100 });
    expect(after).toMatchObject({ events: [{ id: kept.id }], gap: true });
    const next = await poll(t, owner.auth, { cursor: after.cursor, limit: 100 });
    expect(next.gap).toBeUndefined();
  });

  it('are detached, then dropped apart, so a day detached by a run that stopped midway is dropped by the next', async () => {
    t.clock.set('2033-03-20T09:00:00.000Z');
    await ensureEventPartitions(t.database.sql, t.clock.now());
    const owner = await register(t.app);
    const trigger = await insertTrigger(t.database, owner.installationId);
    await send(t, trigger);
    // A run detached the day and stopped before dropping it.
    await t.database.sql`alter table events detach partition events_p20330320`;
    expect(await exists('events_p20330320')).toBe(true);
    expect((await poll(t, owner.auth, { limit: 100 })).events).toEqual([]);

    t.clock.set('2033-03-21T09:00:00.000Z');
    const dropped = await dropExpiredDays(t.database.sql, new Date('2033-03-10T00:00:00.000Z'));
    expect(dropped.days).toContain('2033-03-20');
    expect(await exists('events_p20330320')).toBe(false);
    // Days still attached and inside the horizon are left alone.
    expect(await exists('events_p20330321')).toBe(true);
  });

  it('serve nothing received before the horizon even while the day holding it is kept', async () => {
    t.clock.set('2033-04-01T01:00:00.000Z');
    await ensureEventPartitions(t.database.sql, t.clock.now());
    const owner = await register(t.app);
    const trigger = await insertTrigger(t.database, owner.installationId);
    const early = await send(t, trigger);
    t.clock.set('2033-04-01T23:00:00.000Z');
    const late = await send(t, trigger);
    expect((await poll(t, owner.auth, { limit: 100 })).events.map((e) => e.id)).toEqual([early.id, late.id]);

    t.clock.set('2033-04-08T12:00:00.000Z');
    const horizon = new Date(t.clock.now().getTime() - 7 * DAY);
    await removeExpiredEvents(t.database.sql, { horizon });
    expect((await dropExpiredDays(t.database.sql, horizon)).days).not.toContain('2033-04-01');
    expect(await exists('events_p20330401')).toBe(true);
    expect(await poll(t, owner.auth, { limit: 100 })).toMatchObject({ events: [{ id: late.id }], gap: true });
  });

  it('leave no table behind that retention writes per installation', async () => {
    expect(await exists('event_expiry')).toBe(false);
    const [row] = await t.database.sql<{ n: number }[]>`select count(*)::int as n from event_retention`;
    expect(row!.n).toBe(1);
  });
});

describe('a poll', () => {
  let own: EventsTestApp;
  beforeAll(async () => {
    own = await buildEventsApp();
  });
  afterAll(() => own.close());

  const sendAt = async (trigger: TestTrigger, at: Date) => {
    own.clock.set(at);
    return sendAccepted(own, trigger);
  };

  it('reads a backlog older than yesterday whole and in order, before and beside today’s events', async () => {
    // It looks at yesterday and today first, and reads every kept day when that is not the whole answer.
    const now = Date.now();
    const owner = await register(own.app);
    const trigger = await insertTrigger(own.database, owner.installationId);
    const old = [await sendAt(trigger, new Date(now - 4 * DAY)), await sendAt(trigger, new Date(now - 3 * DAY))];
    const recent = [await sendAt(trigger, new Date(now - 60_000)), await sendAt(trigger, new Date(now))];

    const all = await poll(own, owner.auth, { limit: 10 });
    expect(all.events.map((e) => e.id)).toEqual([...old, ...recent]);
    expect(all.gap).toBeUndefined();
    // limit=1 from the start: the oldest, not the first of the recent days.
    const first = await poll(own, owner.auth, { limit: 1 });
    expect(first.events.map((e) => e.id)).toEqual([old[0]]);
    const second = await poll(own, owner.auth, { cursor: first.cursor, limit: 2 });
    expect(second.events.map((e) => e.id)).toEqual([old[1], recent[0]]);
    expect(second.gap).toBeUndefined();
    const rest = await poll(own, owner.auth, { cursor: second.cursor, limit: 2 });
    expect(rest.events.map((e) => e.id)).toEqual([recent[1]]);
    const none = await poll(own, owner.auth, { cursor: rest.cursor });
    expect(none).toEqual({ events: [], cursor: rest.cursor });
  });
});
