import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { removeExpiredEvents, startRetentionJob } from '../../../src/events/retention/retention.js';
import { createLogger } from '../../../src/logger.js';
import { register } from '../../support/app.js';
import { buildEventsApp, countEvents, type EventsTestApp, insertTrigger, poll, sendAccepted } from '../helpers.js';

const DAY = 86_400_000;
let t: EventsTestApp;
beforeAll(async () => {
  t = await buildEventsApp({ QUOTA_STANDARD: '100000' });
});
afterAll(() => t.close());

const horizonFor = (now: Date, days = 7) => new Date(now.getTime() - days * DAY);

describe('retention', () => {
  it('removes events older than the horizon, acknowledged or not, and a poll from before them says `gap`', async () => {
    t.clock.set('2032-01-01T10:00:00.000Z');
    const owner = await register(t.app);
    const trigger = await insertTrigger(t.database, owner.installationId);
    const old = [await sendAccepted(t, trigger), await sendAccepted(t, trigger), await sendAccepted(t, trigger)];
    const firstPoll = await poll(t, owner.auth, { limit: 1 });
    await poll(t, owner.auth, { cursor: firstPoll.cursor, limit: 1 }); // acknowledges the first one

    t.clock.set('2032-01-05T10:00:00.000Z');
    const recent = [await sendAccepted(t, trigger), await sendAccepted(t, trigger)];

    t.clock.set('2032-01-08T10:00:01.000Z');
    const run = await removeExpiredEvents(t.database.sql, { horizon: horizonFor(t.clock.now()), batchSize: 2 });
    expect(run).toEqual({ ran: true, removed: 3 });
    expect(await countEvents(t.database, owner.installationId)).toBe(2);

    // After the last acknowledged event (1): events 2 and 3 are gone.
    expect(await poll(t, owner.auth)).toMatchObject({ events: recent.map((id) => ({ id })), gap: true });
    // From the old cursor too.
    const replay = await poll(t, owner.auth, { cursor: firstPoll.cursor });
    expect(replay).toMatchObject({ events: recent.map((id) => ({ id })), gap: true });
    // Once past the removed ones, no gap.
    const next = await poll(t, owner.auth, { cursor: replay.cursor });
    expect(next.gap).toBeUndefined();
    expect(next.events).toEqual([]);
    expect(old).toHaveLength(3);
  });

  it('leaves other installations’ recent events and says no gap where nothing was removed', async () => {
    t.clock.set('2032-02-01T10:00:00.000Z');
    const a = await register(t.app);
    const b = await register(t.app);
    const ta = await insertTrigger(t.database, a.installationId);
    const tb = await insertTrigger(t.database, b.installationId);
    await sendAccepted(t, ta);
    t.clock.set('2032-02-06T10:00:00.000Z');
    const kept = await sendAccepted(t, tb);
    t.clock.set('2032-02-08T10:00:01.000Z');
    await removeExpiredEvents(t.database.sql, { horizon: horizonFor(t.clock.now()) });
    expect(await poll(t, a.auth)).toMatchObject({ events: [], gap: true });
    const fromB = await poll(t, b.auth);
    expect(fromB.events.map((e) => e.id)).toEqual([kept]);
    expect(fromB.gap).toBeUndefined();
  });

  it('runs in one process at a time: another holding the lock means this run does nothing', async () => {
    t.clock.set('2032-03-01T10:00:00.000Z');
    const owner = await register(t.app);
    const trigger = await insertTrigger(t.database, owner.installationId);
    await sendAccepted(t, trigger);
    const holder = await t.database.sql.reserve();
    try {
      await holder`select pg_advisory_lock(7262011002)`;
      const run = await removeExpiredEvents(t.database.sql, { horizon: new Date('2032-04-01T00:00:00Z') });
      expect(run).toEqual({ ran: false, removed: 0 });
      expect(await countEvents(t.database, owner.installationId)).toBe(1);
      await holder`select pg_advisory_unlock(7262011002)`;
    } finally {
      holder.release();
    }
    expect(await removeExpiredEvents(t.database.sql, { horizon: new Date('2032-04-01T00:00:00Z') })).toMatchObject({ ran: true });
    expect(await countEvents(t.database, owner.installationId)).toBe(0);
  });

  it('drops quota counters of days past the horizon and keeps the recent ones', async () => {
    const { installationId } = await register(t.app);
    const trigger = await insertTrigger(t.database, installationId);
    for (const day of ['2031-01-01', '2031-01-02', '2031-01-20']) {
      await t.database.sql`insert into daily_usage (installation_id, day, kept) values (${installationId}, ${day}, 3)`;
      await t.database.sql`insert into trigger_daily_usage (trigger_id, day, kept) values (${trigger.id}, ${day}, 3)`;
    }
    await removeExpiredEvents(t.database.sql, { horizon: new Date('2031-01-10T12:00:00Z'), batchSize: 1 });
    const days = await t.database.sql<{ day: string }[]>`select day::text from daily_usage where installation_id = ${installationId}`;
    const triggerDays = await t.database.sql<{ day: string }[]>`select day::text from trigger_daily_usage where trigger_id = ${trigger.id}`;
    expect(days.map((r) => r.day)).toEqual(['2031-01-20']);
    expect(triggerDays.map((r) => r.day)).toEqual(['2031-01-20']);
  });

  it('works in bounded batches over a large backlog', async () => {
    t.clock.set('2032-05-01T10:00:00.000Z');
    const owner = await register(t.app);
    await t.database.sql`
      insert into events (installation_id, position, id, type, received_at, data)
      select ${owner.installationId}, g, 'bulk_' || g, 'trigger.event', '2032-05-01T00:00:00Z'::timestamptz + g * interval '1 second', '{}'::jsonb
        from generate_series(1, 12000) g`;
    await t.database.sql`update installations set last_event_position = 12000 where id = ${owner.installationId}`;
    // Everything received in the first 10,000 seconds is past the horizon.
    const run = await removeExpiredEvents(t.database.sql, { horizon: new Date('2032-05-01T02:46:40.500Z'), batchSize: 3000 });
    expect(run).toEqual({ ran: true, removed: 10_000 });
    // No per-installation record of how far retention went: the poll tells the gap from the
    // positions missing before 10,001.
    const answer = await poll(t, owner.auth, { limit: 1 });
    expect(answer).toMatchObject({ events: [{ id: 'bulk_10001' }], gap: true });
  });

  it('runs as a background job on the horizon of EVENT_RETENTION_DAYS before the clock', async () => {
    t.clock.set('2032-06-01T10:00:00.000Z');
    const owner = await register(t.app);
    const trigger = await insertTrigger(t.database, owner.installationId);
    await sendAccepted(t, trigger);
    t.clock.set('2032-06-03T10:00:01.000Z');
    const job = startRetentionJob({
      sql: t.database.sql,
      clock: t.clock,
      logger: createLogger('silent'),
      retentionDays: 2,
      intervalMs: 20,
    });
    try {
      const deadline = Date.now() + 5_000;
      while ((await countEvents(t.database, owner.installationId)) > 0 && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 20));
      expect(await countEvents(t.database, owner.installationId)).toBe(0);
    } finally {
      await job.stop();
    }
  });
});
