import { randomUUID } from 'node:crypto';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { quotaExceededEventId } from '../../../src/events/broker-events.js';
import { quotaDay } from '../../../src/plans/plan.js';
import { createTestDatabase, type TestDatabase, withDatabase } from '../../support/database.js';
import { insertTrigger, installationWithTrigger, type TestTrigger } from '../helpers.js';

/**
 * omb_ingest_trigger_batch_sealed answers a message its trigger refuses at once, keeps an
 * installation's other messages together only when every one of them is plainly to be kept, and
 * sends every other message through omb_ingest_trigger_alone_sealed, one at a time. One batch here
 * mixes all of these, across installations, and the outcome must be what the messages would get
 * one by one: outcomes, positions dense and in batch order, counters, and the quota.
 */

let database: TestDatabase;
beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(() => database.drop());

const QUOTA = 5;

/** A message as the batcher sends it; `data` becomes its delivery's `payload.data`. */
function message(trigger: TestTrigger, at: Date, overrides: Record<string, unknown> = {}) {
  const { data = { n: Math.random() }, ...rest } = overrides;
  return {
    eventId: `msg_${randomUUID()}`,
    triggerId: trigger.composioTriggerId,
    userId: trigger.composioUserId,
    payload: { type: 'composio.trigger.message', data },
    receivedAt: at.toISOString(),
    day: quotaDay(at).day,
    resetsAt: quotaDay(at).resetsAt.toISOString(),
    quotaEventId: quotaExceededEventId(quotaDay(at).day),
    quotaStandard: QUOTA,
    quotaPaid: QUOTA * 10,
    ...rest,
  };
}

interface Row {
  ordinal: number;
  outcome: string;
  installation: string | null;
  queued: string | null;
}

async function ingest(messages: unknown[]): Promise<Row[]> {
  const rows = await database.sql<Row[]>`
    select ordinal, outcome, installation, queued from omb_ingest_trigger_batch_sealed(${JSON.stringify(messages)}::text::jsonb)`;
  return [...rows].sort((a, b) => a.ordinal - b.ordinal);
}

async function queue(installationId: string) {
  return database.sql<{ position: number; id: string; type: string }[]>`
    select position::int, id, type from events where installation_id = ${installationId} order by position`;
}

describe('a batch of trigger messages', () => {
  it('keeps clean installations together and the rest one by one, as each message would be alone', async () => {
    const midnight = new Date(Date.UTC(2026, 10, 30, 0, 0, 0));
    const before = new Date(midnight.getTime() - 1000);
    const after = new Date(midnight.getTime() + 1000);
    const clean = await installationWithTrigger(database);
    const twice = await installationWithTrigger(database);
    const paused = await installationWithTrigger(database, { enabled: false });
    const pausedSibling = await insertTrigger(database, paused.installationId);
    const nearLimit = await installationWithTrigger(database);
    const filtered = await installationWithTrigger(database, { filter: { label: 'bug' } });
    const stranger = { ...clean, composioTriggerId: 'ti_nobody_knows' };
    // The day before midnight: nearLimit has kept QUOTA - 1 already; clean has kept 2.
    const dayBefore = before.toISOString().slice(0, 10);
    await database.sql`insert into daily_usage (installation_id, day, kept) values
                       (${nearLimit.installationId}, ${dayBefore}, ${QUOTA - 1}), (${clean.installationId}, ${dayBefore}, 2)`;
    const repeated = message(twice, before);
    const batch = [
      message(clean, before), // 1
      message(nearLimit, before), // 2: the last one the quota allows
      repeated, // 3
      message(paused, before), // 4
      message(clean, after), // 5: the next day
      message(nearLimit, before), // 6: over the quota: quota.exceeded is queued once
      { ...repeated }, // 7: the same delivery again in this batch
      message(pausedSibling, before), // 8
      message(stranger, before), // 9
      message(filtered, before), // 10
      message(clean, before), // 11
      message(twice, before, { userId: 'omb_someone_else' }), // 12
      message(nearLimit, before), // 13
      message(filtered, before, { data: { label: 'Bug report' } }), // 14: passes its filter
    ];
    const rows = await ingest(batch);
    expect(rows.map((r) => [r.ordinal, r.outcome, r.queued])).toEqual([
      [1, 'accepted', 'trigger.event'],
      [2, 'accepted', 'trigger.event'],
      [3, 'accepted', 'trigger.event'],
      [4, 'paused', null],
      [5, 'accepted', 'trigger.event'],
      [6, 'over_quota', 'quota.exceeded'],
      [7, 'duplicate', null],
      [8, 'accepted', 'trigger.event'],
      [9, 'unknown_trigger', null],
      [10, 'filtered', null],
      [11, 'accepted', 'trigger.event'],
      [12, 'user_mismatch', null],
      [13, 'over_quota', null],
      [14, 'accepted', 'trigger.event'],
    ]);
    expect(rows.find((r) => r.ordinal === 1)!.installation).toBe(clean.installationId);

    // Each queue holds its events densely, in the order they came in the batch.
    expect(await queue(clean.installationId)).toEqual([
      { position: 1, id: batch[0]!.eventId, type: 'trigger.event' },
      { position: 2, id: batch[4]!.eventId, type: 'trigger.event' },
      { position: 3, id: batch[10]!.eventId, type: 'trigger.event' },
    ]);
    expect(await queue(nearLimit.installationId)).toEqual([
      { position: 1, id: batch[1]!.eventId, type: 'trigger.event' },
      { position: 2, id: `omb:quota.exceeded:${dayBefore}`, type: 'quota.exceeded' },
    ]);
    expect((await queue(twice.installationId)).map((e) => e.id)).toEqual([repeated.eventId]);
    expect((await queue(paused.installationId)).map((e) => e.id)).toEqual([batch[7]!.eventId]);
    expect(await queue(filtered.installationId)).toEqual([{ position: 1, id: batch[13]!.eventId, type: 'trigger.event' }]);
    const [positions] = await database.sql<{ clean: number; near: number }[]>`
      select (select last_event_position::int from installations where id = ${clean.installationId}) as clean,
             (select last_event_position::int from installations where id = ${nearLimit.installationId}) as near`;
    expect(positions).toEqual({ clean: 3, near: 2 });

    // Counted per day, for the installation and for each trigger.
    const usage = await database.sql<{ installation_id: string; day: string; kept: number; skipped: number }[]>`
      select installation_id, day::text, kept, skipped from daily_usage
       where installation_id in (${clean.installationId}, ${nearLimit.installationId}) order by installation_id, day`;
    expect(usage.filter((u) => u.installation_id === clean.installationId).map((u) => [u.day, u.kept])).toEqual([
      [dayBefore, 4],
      [after.toISOString().slice(0, 10), 1],
    ]);
    expect(usage.filter((u) => u.installation_id === nearLimit.installationId).map((u) => [u.kept, u.skipped])).toEqual([[QUOTA, 2]]);
    const perTrigger = await database.sql<{ trigger_id: string; day: string; kept: number }[]>`
      select trigger_id, day::text, kept from trigger_daily_usage where trigger_id = ${clean.id} order by day`;
    expect(perTrigger.map((t) => [t.day, t.kept])).toEqual([
      [dayBefore, 2],
      [after.toISOString().slice(0, 10), 1],
    ]);
  });

  it('stores a delivery the queue already holds once, even among clean messages', async () => {
    const trigger = await installationWithTrigger(database);
    const at = new Date();
    const first = message(trigger, at);
    expect((await ingest([first])).map((r) => r.outcome)).toEqual(['accepted']);
    const rows = await ingest([message(trigger, at), { ...first }, message(trigger, at)]);
    expect(rows.map((r) => r.outcome)).toEqual(['accepted', 'duplicate', 'accepted']);
    expect((await queue(trigger.installationId)).map((e) => e.position)).toEqual([1, 2, 3]);
  });

  it('keeps a large batch of many installations together in order, positions dense per installation', async () => {
    const triggers = await Promise.all(Array.from({ length: 20 }, () => installationWithTrigger(database)));
    const at = new Date();
    const batch = Array.from({ length: 100 }, (_, i) => message(triggers[(i * 7) % triggers.length]!, at, { quotaStandard: 1000 }));
    const rows = await ingest(batch);
    expect(rows.every((r) => r.outcome === 'accepted')).toBe(true);
    for (const trigger of triggers) {
      const expected = batch.filter((m) => m.triggerId === trigger.composioTriggerId).map((m) => m.eventId);
      const held = await queue(trigger.installationId);
      expect(held.map((e) => e.id)).toEqual(expected);
      expect(held.map((e) => e.position)).toEqual(expected.map((_, i) => i + 1));
    }
  });

  it('probes the queue for redeliveries once per batch, not once per message', async () => {
    const triggers = await Promise.all(Array.from({ length: 5 }, () => installationWithTrigger(database)));
    const at = new Date();
    const batch = Array.from({ length: 30 }, (_, i) => message(triggers[i % triggers.length]!, at, { quotaStandard: 1000 }));
    const probes = await database.sql.begin(async (sql) => {
      await sql`set local track_functions = 'all'`;
      const rows = await sql<Row[]>`select outcome from omb_ingest_trigger_batch_sealed(${JSON.stringify(batch)}::text::jsonb)`;
      expect(rows.map((r) => r.outcome)).toEqual(batch.map(() => 'accepted'));
      const [called] = await sql<{ calls: number }[]>`
        select coalesce(sum(calls), 0)::int as calls from pg_stat_xact_user_functions where funcname = 'omb_events_seen'`;
      return called!.calls;
    });
    expect(probes).toBe(1);
  });

  it('plans its statements once per connection, not again for every batch', async () => {
    // Planning the batch's statements for the values given cost more than a batch of 30 took to
    // run (the redelivery probe alone, about 0.16 ms). Postgres reports each planning to the
    // client that asked for it with log_planner_stats.
    const plannings: string[] = [];
    const one = postgres(withDatabase(inject('pgAdminUrl'), database.name), {
      max: 1,
      onnotice: (notice) => void (notice.message === 'PLANNER STATISTICS' && plannings.push(notice.message)),
    });
    try {
      const triggers = await Promise.all([installationWithTrigger(database), installationWithTrigger(database)]);
      // Far from the quota: every message is kept together with its installation's others.
      const batch = () => JSON.stringify(triggers.map((trigger) => message(trigger, new Date(), { quotaStandard: 1000, quotaPaid: 1000 })));
      // The first call makes the plans.
      await one`select * from omb_ingest_trigger_batch_sealed(${batch()}::text::jsonb)`;
      await one.unsafe('set client_min_messages = log');
      await one.unsafe('set log_planner_stats = on');
      // Sent unprepared, the statement itself is planned each time; nothing within the function is.
      for (let i = 0; i < 8; i++) await one.unsafe('select * from omb_ingest_trigger_batch_sealed($1::text::jsonb)', [batch()]);
      expect(plannings).toHaveLength(8);
      expect(await queue(triggers[0]!.installationId)).toHaveLength(9);
    } finally {
      await one.end();
    }
  });

  it('stores each message’s sealed data instead of its clear data, on either path, and filters on the clear data', async () => {
    const clean = await installationWithTrigger(database);
    const twice = await installationWithTrigger(database);
    const filtered = await installationWithTrigger(database, { filter: { label: 'bug' } });
    const at = new Date();
    // What the broker would send: any bytes do here (the database neither opens nor checks them).
    const sealed = (m: { eventId: string }) => ({ ...m, sealed: Buffer.from(`sealed:${m.eventId}`).toString('base64') });
    const repeated = sealed(message(twice, at, { data: { secret: 'twice' } }));
    const batch = [
      sealed(message(clean, at, { data: { secret: 'together' } })), // 1: kept with its installation's others
      message(clean, at, { data: { said: 'in clear' } }), // 2: no sealed data (a broker not sealing yet)
      repeated, // 3: the same id twice in a batch: one at a time
      { ...repeated }, // 4
      sealed(message(filtered, at, { data: { label: 'bug report', secret: 'kept' } })), // 5: the filter reads the clear data
      sealed(message(filtered, at, { data: { label: 'feature', secret: 'left out' } })), // 6
      sealed(message(clean, at, { userId: 'someone_else', data: { secret: 'stranger' } })), // 7: another user's
    ];
    const rows = await ingest(batch);
    expect(rows.map((r) => r.outcome)).toEqual(['accepted', 'accepted', 'accepted', 'duplicate', 'accepted', 'filtered', 'user_mismatch']);

    const stored = await database.sql<{ id: string; data: unknown; sealed: Buffer | null }[]>`
      select id, data, sealed from events
       where installation_id in (${clean.installationId}, ${twice.installationId}, ${filtered.installationId})
       order by installation_id, position`;
    const byId = new Map(stored.map((row) => [row.id, row]));
    expect(stored).toHaveLength(4);
    for (const m of [batch[0]!, batch[2]!, batch[4]!]) {
      expect(byId.get(m.eventId)?.data, m.eventId).toBeNull();
      expect(byId.get(m.eventId)?.sealed?.toString('utf8'), m.eventId).toBe(`sealed:${m.eventId}`);
    }
    expect(byId.get(batch[1]!.eventId)).toMatchObject({ data: { said: 'in clear' }, sealed: null });
    // No clear data of a sealed message is stored anywhere.
    const [clearText] = await database.sql<{ n: number }[]>`
      select count(*)::int as n from events where data::text like '%secret%'`;
    expect(clearText!.n).toBe(0);
  });

  it('answers a sealed message sent without its clear data needs_data where the filter reads it, and nothing else', async () => {
    const clean = await installationWithTrigger(database);
    const twice = await installationWithTrigger(database, { filter: { label: 'bug' } });
    const filtered = await installationWithTrigger(database, { filter: { label: 'bug' } });
    const emptyFilter = await installationWithTrigger(database, { filter: {} });
    const gmail = await installationWithTrigger(database, {
      toolkit: 'gmail',
      triggerSlug: 'GMAIL_NEW_GMAIL_MESSAGE',
      filter: { from: 'boss@example.com' },
    });
    const pausedFiltered = await installationWithTrigger(database, { enabled: false, filter: { label: 'bug' } });
    const at = new Date();
    // Sealed, with no `payload`: as the broker sends a message whose clear data Postgres need not parse.
    const withoutData = (trigger: TestTrigger, overrides: Record<string, unknown> = {}) => {
      const { payload: _clear, ...m } = message(trigger, at, overrides);
      return { ...m, sealed: Buffer.from(`sealed:${m.eventId}`).toString('base64') };
    };
    const repeated = withoutData(twice);
    const batch = [
      withoutData(clean), // 1: no filter
      withoutData(filtered), // 2: the filter reads the data
      withoutData(emptyFilter), // 3: an empty filter passes everything
      withoutData(gmail), // 4: Gmail applied the filter as its search
      withoutData(filtered, { userId: 'someone_else' }), // 5: another user's, whatever the filter
      withoutData(pausedFiltered), // 6: paused, whatever the filter
      repeated, // 7: the same id twice: one at a time, where the filter reads it too
      { ...repeated }, // 8
    ];
    const rows = await ingest(batch);
    expect(rows.map((r) => r.outcome)).toEqual([
      'accepted',
      'needs_data',
      'accepted',
      'accepted',
      'user_mismatch',
      'paused',
      'needs_data',
      'needs_data',
    ]);
    expect(rows.map((r) => r.queued)).toEqual(['trigger.event', null, 'trigger.event', 'trigger.event', null, null, null, null]);
    expect(rows[1]!.installation).toBe(filtered.installationId);

    // Nothing stored or counted for a message answered needs_data.
    for (const trigger of [twice, filtered]) {
      expect(await queue(trigger.installationId), trigger.installationId).toEqual([]);
      const counted = await database.sql`select 1 from daily_usage where installation_id = ${trigger.installationId}
                                         union all select 1 from trigger_daily_usage where trigger_id = ${trigger.id}`;
      expect(counted, trigger.installationId).toHaveLength(0);
    }
    for (const trigger of [clean, emptyFilter, gmail]) expect(await queue(trigger.installationId)).toHaveLength(1);

    // Sent again with its data, it is kept or filtered out as usual, on either path.
    const again = await ingest([
      { ...batch[1]!, payload: { data: { label: 'bug report' } } },
      { ...repeated, payload: { data: { label: 'feature' } } },
    ]);
    expect(again.map((r) => r.outcome)).toEqual(['accepted', 'filtered']);
  });

  it('refuses a message with neither clear nor sealed data, on either path, storing nothing', async () => {
    const clean = await installationWithTrigger(database);
    const { payload: _clear, ...bare } = message(clean, new Date());
    await expect(ingest([bare])).rejects.toThrow(/neither data nor sealed data/);
    await expect(ingest([bare, { ...bare }])).rejects.toThrow(/neither data nor sealed data/);
    expect(await queue(clean.installationId)).toEqual([]);
  });

  it('fails loudly, never silently, when an append finds no installation', async () => {
    await expect(
      database.sql`select omb_append_event(${randomUUID()}::uuid, 'msg_nowhere', 'trigger.event', null, null, null, null, null,
                                           now(), '{}'::jsonb)`,
    ).rejects.toThrow(/does not exist/);
  });
});
