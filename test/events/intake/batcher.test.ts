import { randomUUID } from 'node:crypto';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Sql } from '../../../src/db/database.js';
import { quotaExceededEventId } from '../../../src/events/broker-events.js';
import { IngestBatcher, type TriggerMessageInput } from '../../../src/events/intake/ingest-batcher.js';
import { createLogger } from '../../../src/logger.js';
import { quotaDay } from '../../../src/plans/plan.js';
import { LogCapture } from '../../support/app.js';
import { createTestDatabase, type TestDatabase } from '../../support/database.js';
import { until } from '../../support/http.js';
import { countEvents, installationWithTrigger, type TestTrigger } from '../helpers.js';

let database: TestDatabase;
beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(() => database.drop());

function message(trigger: TestTrigger, overrides: Partial<TriggerMessageInput> = {}): TriggerMessageInput {
  const now = new Date();
  return {
    eventId: `msg_${randomUUID()}`,
    triggerId: trigger.composioTriggerId,
    userId: trigger.composioUserId,
    dataJson: '{"n":1}',
    receivedAt: now.toISOString(),
    day: quotaDay(now).day,
    resetsAt: quotaDay(now).resetsAt.toISOString(),
    quotaEventId: quotaExceededEventId(quotaDay(now).day),
    quotaStandard: 1_000_000,
    quotaPaid: 1_000_000,
    ...overrides,
  };
}

/** The batcher's SQL, counting the statements it sends. */
function counting(sql: Sql): { sql: Sql; statements: () => number } {
  let statements = 0;
  const wrapped = ((strings: TemplateStringsArray, ...values: unknown[]) => {
    statements++;
    return (sql as unknown as (s: TemplateStringsArray, ...v: unknown[]) => unknown)(strings, ...values);
  }) as unknown as Sql;
  return { sql: wrapped, statements: () => statements };
}

/** The batcher's SQL, keeping the text of what each statement is sent. */
function recording(sql: Sql): { sql: Sql; sent: string[] } {
  const sent: string[] = [];
  const wrapped = ((strings: TemplateStringsArray, ...values: unknown[]) => {
    sent.push(values.map(String).join(''));
    return (sql as unknown as (s: TemplateStringsArray, ...v: unknown[]) => unknown)(strings, ...values);
  }) as unknown as Sql;
  return { sql: wrapped, sent };
}

/** A message as a sealing broker writes it: any bytes do as sealed data here (the database never opens them). */
function sealedMessage(trigger: TestTrigger, data: Record<string, unknown>, dataForFilterOnly = true): TriggerMessageInput {
  return message(trigger, { dataJson: JSON.stringify(data), sealed: Buffer.from('sealed').toString('base64'), dataForFilterOnly });
}

describe('ingest group commit', () => {
  it('writes messages that arrive while others commit together, in fewer transactions', async () => {
    const triggers = await Promise.all(Array.from({ length: 5 }, () => installationWithTrigger(database)));
    const { sql, statements } = counting(database.sql);
    const batcher = new IngestBatcher(sql, createLogger('silent'), { maxInFlight: 2, maxBatch: 50 });
    // Interleaved installations: every batch takes several installations' locks, in one order.
    const inputs = Array.from({ length: 400 }, (_, i) => message(triggers[i % triggers.length]!));
    const rows = await Promise.all(inputs.map((input) => batcher.write(input)));
    expect(rows.every((row) => row.outcome === 'accepted' && row.queued === 'trigger.event')).toBe(true);
    expect(statements()).toBeLessThan(20);
    for (const trigger of triggers) expect(await countEvents(database, trigger.installationId)).toBe(80);
    // Positions stay dense and in order per installation.
    const [gaps] = await database.sql<{ n: number }[]>`
      select count(*)::int as n from (
        select position - lag(position) over (partition by installation_id order by position) as step from events
      ) s where step <> 1`;
    expect(gaps!.n).toBe(0);
  });

  it('answers a message alone at once when nothing else is in flight', async () => {
    const trigger = await installationWithTrigger(database);
    const { sql, statements } = counting(database.sql);
    const batcher = new IngestBatcher(sql, createLogger('silent'));
    expect((await batcher.write(message(trigger))).outcome).toBe('accepted');
    expect((await batcher.write(message(trigger))).outcome).toBe('accepted');
    expect(statements()).toBe(2);
  });

  it('sends what arrives during a quick transaction after it, and beside one that is slow', async () => {
    const [held, other] = await Promise.all([installationWithTrigger(database), installationWithTrigger(database)]);
    const { sql, statements } = counting(database.sql);
    // Quick: the first message goes alone at once, the nine behind it together in one more.
    const patient = new IngestBatcher(sql, createLogger('silent'), { maxInFlight: 2, maxBatch: 50, laneAfterMs: 10_000 });
    const quick = await Promise.all(Array.from({ length: 10 }, () => patient.write(message(other))));
    expect(quick.every((row) => row.outcome === 'accepted')).toBe(true);
    expect(statements()).toBe(2);

    // Slow: another process holds the installation's row, so the transaction appending to it waits.
    let release = () => {};
    const holding = database.sql.begin(async (tx) => {
      await tx`select 1 from installations where id = ${held.installationId} for update`;
      await new Promise<void>((resolve) => (release = resolve));
    });
    await until(
      async () => {
        const [row] = await database.sql<{ n: number }[]>`
        select count(*)::int as n from pg_locks l join pg_class c on c.oid = l.relation
         where c.relname = 'installations' and l.mode = 'RowShareLock' and l.pid <> pg_backend_pid()
           and l.database = (select oid from pg_database where datname = current_database())`;
        return row!.n > 0;
      },
      5_000,
      'the row lock',
    );
    const batcher = new IngestBatcher(database.sql, createLogger('silent'), { maxInFlight: 2, maxBatch: 50, laneAfterMs: 100 });
    const blocked = batcher.write(message(held));
    let blockedDone = false;
    void blocked.finally(() => (blockedDone = true));
    const started = performance.now();
    // Not behind the blocked transaction for good: once it has run 100 ms, another one starts beside it.
    const beside = await batcher.write(message(other));
    expect(beside.outcome).toBe('accepted');
    expect(performance.now() - started).toBeGreaterThanOrEqual(90);
    expect(blockedDone).toBe(false);
    release();
    await holding;
    expect((await blocked).outcome).toBe('accepted');
    expect(await countEvents(database, held.installationId)).toBe(1);
  });

  it('does not let one message Postgres refuses fail the rest of its batch', async () => {
    const trigger = await installationWithTrigger(database);
    const logs = new LogCapture();
    const batcher = new IngestBatcher(database.sql, createLogger('warn', logs), { maxInFlight: 1, maxBatch: 50 });
    const good = Array.from({ length: 10 }, () => message(trigger));
    const bad = message(trigger, { dataJson: '{"unfinished":' });
    const results = await Promise.allSettled([...good.slice(0, 5), bad, ...good.slice(5)].map((m) => batcher.write(m)));
    expect(results.filter((r) => r.status === 'rejected')).toHaveLength(1);
    expect(results[5]!.status).toBe('rejected');
    expect(await countEvents(database, trigger.installationId)).toBe(10);
    expect(logs.text).toContain('writing its messages one by one');
  });

  it('sends a sealed message’s clear data only where the database must read it, in the next transaction', async () => {
    const [plain, filtered] = await Promise.all([
      installationWithTrigger(database),
      installationWithTrigger(database, { filter: { label: 'bug' } }),
    ]);
    const { sql, sent } = recording(database.sql);
    const batcher = new IngestBatcher(sql, createLogger('silent'), { maxInFlight: 1, maxBatch: 50 });
    const rows = await Promise.all([
      batcher.write(sealedMessage(plain, { note: 'first-alone' })),
      batcher.write(sealedMessage(plain, { note: 'unfiltered-secret' })),
      batcher.write(sealedMessage(filtered, { label: 'bug', note: 'matching-secret' })),
      batcher.write(sealedMessage(filtered, { label: 'feature', note: 'other-secret' })),
      // Its numbers must be parsed by Postgres, to refuse what jsonb cannot hold.
      batcher.write(sealedMessage(plain, { note: 'checked-secret' }, false)),
    ]);
    expect(rows.map((r) => r.outcome)).toEqual(['accepted', 'accepted', 'accepted', 'filtered', 'accepted']);
    // The first alone, the rest together, then the two the filter reads, with their data.
    expect(sent).toHaveLength(3);
    const times = (text: string) => sent.filter((statement) => statement.includes(text)).length;
    expect([times('first-alone'), times('unfiltered-secret')]).toEqual([0, 0]);
    expect([times('matching-secret'), times('other-secret'), times('checked-secret')]).toEqual([1, 1, 1]);
    expect(sent[2]).toContain('matching-secret');
    expect(await countEvents(database, plain.installationId)).toBe(3);
    expect(await countEvents(database, filtered.installationId)).toBe(1);
    // The message answered needs_data was counted once, when it was kept.
    const [usage] = await database.sql<{ kept: number }[]>`select kept from daily_usage where installation_id = ${filtered.installationId}`;
    expect(usage!.kept).toBe(1);
  });

  it('sends a sealed message’s clear data again where the database asks, on the one-at-a-time path too', async () => {
    const filtered = await installationWithTrigger(database, { filter: { label: 'bug' } });
    const { sql, sent } = recording(database.sql);
    const batcher = new IngestBatcher(sql, createLogger('silent'), { maxInFlight: 1, maxBatch: 50 });
    const [first, matching, bad, other] = await Promise.allSettled([
      batcher.write(sealedMessage(filtered, { label: 'bug', note: 'first-alone' })),
      batcher.write(sealedMessage(filtered, { label: 'bug', note: 'matching-secret' })),
      // Fails the batch, so each of its messages goes alone.
      batcher.write(message(filtered, { dataJson: '{"unfinished":' })),
      batcher.write(sealedMessage(filtered, { label: 'feature', note: 'other-secret' })),
    ]);
    expect([first, matching, other].map((r) => r.status === 'fulfilled' && r.value.outcome)).toEqual(['accepted', 'accepted', 'filtered']);
    expect(bad.status).toBe('rejected');
    const times = (text: string) => sent.filter((statement) => statement.includes(text)).length;
    // Sent without their data in the batch that failed and in their own first transaction, then once with it.
    expect([times('matching-secret'), times('other-secret')]).toEqual([1, 1]);
    expect(await countEvents(database, filtered.installationId)).toBe(2);
  });

  it('refuses a batch, and every message waiting behind it, at once when the database cannot serve', async () => {
    const trigger = await installationWithTrigger(database);
    // A database that is away: each statement fails, after a while, as an unreachable one does.
    let statements = 0;
    const away = (() => {
      statements++;
      return new Promise((_resolve, reject) =>
        setTimeout(() => reject(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' })), 50),
      );
    }) as unknown as Sql;
    const batcher = new IngestBatcher(away, createLogger('silent'), { maxInFlight: 1, maxBatch: 50 });
    const results = await Promise.allSettled(Array.from({ length: 21 }, () => batcher.write(message(trigger))));
    expect(results.every((r) => r.status === 'rejected' && (r.reason as { code?: string }).code === 'ECONNREFUSED')).toBe(true);
    // The first message went alone; the 20 that queued behind it were never sent, one by one or
    // together, to a database that had just failed.
    expect(statements).toBe(1);
  });

  it('stores a message delivered twice in one batch once', async () => {
    const trigger = await installationWithTrigger(database);
    const batcher = new IngestBatcher(database.sql, createLogger('silent'), { maxInFlight: 1, maxBatch: 50 });
    const first = message(trigger);
    const outcomes = await Promise.all(
      [batcher.write(message(trigger)), batcher.write(first), batcher.write(first)].map(async (p) => (await p).outcome),
    );
    expect(outcomes.sort()).toEqual(['accepted', 'accepted', 'duplicate']);
    expect(await countEvents(database, trigger.installationId)).toBe(2);
  });

  it('announces each installation it queued for in the transaction that appends, with no step after the commit', async () => {
    const [one, two] = [await installationWithTrigger(database), await installationWithTrigger(database)];
    const heard: string[] = [];
    const listening = postgres(database.url, { max: 1, onnotice: () => {} });
    try {
      await listening.listen('omb_events', (payload) => heard.push(payload));
      // Nothing but the batch's one statement is sent: no notifier, no second statement.
      const { sql, statements } = counting(database.sql);
      const batcher = new IngestBatcher(sql, createLogger('silent'), { maxInFlight: 1, maxBatch: 50 });
      const rows = await Promise.all(
        [message(one), message(two), message(one), message(one, { triggerId: 'unknown' })].map((m) => batcher.write(m)),
      );
      expect(rows.map((row) => row.outcome)).toEqual(['accepted', 'accepted', 'accepted', 'unknown_trigger']);
      expect(statements()).toBeLessThanOrEqual(2);
      await until(() => heard.length >= 2, 5_000, 'the announcements');
      await new Promise((resolve) => setTimeout(resolve, 100));
      // Once per installation per transaction (the first message went alone, the rest together).
      expect([...new Set(heard)].sort()).toEqual([one.installationId, two.installationId].sort());
    } finally {
      await listening.end();
    }
  });
});
