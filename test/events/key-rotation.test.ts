import { randomBytes } from 'node:crypto';
import { pino } from 'pino';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { missingKeyIds } from '../../src/data-keys/in-use.js';
import { PREVIOUS_RELEASE_APPLICATION_NAMES } from '../../src/db/database.js';
import { rotateEventData } from '../../src/events/rotation.js';
import { createEventsRuntime } from '../../src/events/runtime.js';
import { Sealing } from '../../src/events/sealing.js';
import { createLogger } from '../../src/logger.js';
import { runCli } from '../operators/support.js';
import { buildTestApp, register, type TestApp } from '../support/app.js';
import { dataKeys, TEST_DATA_KEYS } from '../support/data-keys.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { until } from '../support/http.js';
import { accountExpired, BROKER_ENV, getEvents, insertTrigger, post, signed, type TestTrigger, triggerMessage } from './helpers.js';

/**
 * `npm run cli -- data-keys rotate`: every trigger event's data sealed under the first data key,
 * while brokers serve. What was under the old key, and what was in clear, is handed back as
 * before; the old key leaves the keys in use, so brokers start without it.
 */

const NEW_KEYS = `fresh:${randomBytes(32).toString('base64')},${TEST_DATA_KEYS}`;

let database: TestDatabase;
beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(() => database.drop());

async function accepted(t: TestApp, trigger: TestTrigger, data: Record<string, unknown>): Promise<string> {
  const webhook = signed(triggerMessage(trigger, data), { at: t.clock.now() });
  expect((await post(t, webhook)).json()).toEqual({ outcome: 'accepted' });
  return webhook.id;
}

async function keyIdsOfEvents(installationId: string): Promise<Array<string | null>> {
  const rows = await database.sql<{ key_id: string | null }[]>`
    select case when sealed is null then null else convert_from(substring(sealed from 3 for get_byte(sealed, 1)), 'SQL_ASCII') end as key_id
      from events where installation_id = ${installationId} order by position`;
  return rows.map((row) => row.key_id);
}

describe('rotating the data keys', () => {
  it('seals every trigger event under the new key while webhooks arrive, serves them all, and retires the old key', async () => {
    // Brokers of the old key store events; a few are in clear, as the previous release stored them.
    const before = await buildTestApp(BROKER_ENV, { database });
    const owner = await register(before.app);
    const trigger = await insertTrigger(database, owner.installationId);
    for (let n = 0; n < 12; n++) await accepted(before, trigger, { n });
    await database.sql`update events set data = jsonb_build_object('n', position - 1), sealed = null
                        where installation_id = ${owner.installationId} and position <= 3`;
    await until(
      async () => (await database.sql`select count(*)::int as n from webhook_secrets where sealed is not null`)[0]!.n === 1,
      5_000,
      'the brokers’ webhook secret sealed under the old key',
    );
    await before.close();

    // The brokers get the new key in front and serve; the rotation runs beside them, in small
    // batches, while webhooks keep coming.
    const during = await buildTestApp({ ...BROKER_ENV, DATA_ENCRYPTION_KEYS: NEW_KEYS }, { database });
    let sending = true;
    const sender = (async () => {
      for (let n = 12; sending; n++) await accepted(during, trigger, { n });
    })();
    const batches: number[] = [];
    const result = await rotateEventData(database.sql, dataKeys(NEW_KEYS), {
      batchSize: 4,
      onBatch: (batch) => batches.push(batch.resealed + batch.sealedFromClear),
    });
    sending = false;
    await sender;
    // The 9 events under the old key, and the brokers' webhook secret, sealed under it once they sealed.
    expect(result).toMatchObject({ resealed: 10, sealedFromClear: 3, unreadable: 0, leftInClear: 0, retired: ['test'] });
    const secretKeys = await database.sql<{ key_id: string }[]>`
      select convert_from(substring(sealed from 3 for get_byte(sealed, 1)), 'SQL_ASCII') as key_id from webhook_secrets`;
    expect(secretKeys.map((row) => row.key_id)).toEqual(['fresh']);
    expect(batches.length).toBeGreaterThanOrEqual(3);
    expect(new Set(await keyIdsOfEvents(owner.installationId))).toEqual(new Set(['fresh']));
    await during.close();

    // A broker given only the new key starts and hands back every event.
    const after = await buildTestApp({ ...BROKER_ENV, DATA_ENCRYPTION_KEYS: NEW_KEYS.split(',')[0]! }, { database });
    try {
      expect(await missingKeyIds(database.sql, dataKeys(NEW_KEYS.split(',')[0]!))).toEqual([]);
      const answer = await getEvents(after, owner.auth, { limit: 100 });
      const ns = answer.json<{ events: Array<{ data: { n: number } }> }>().events.map((e) => e.data.n);
      expect(ns.slice(0, 12)).toEqual(Array.from({ length: 12 }, (_, n) => n));
      expect(ns).toEqual(Array.from({ length: ns.length }, (_, n) => n));
      // Webhooks arrived while it ran, sealed under the new key by the serving broker.
      expect(ns.length).toBeGreaterThan(12);
    } finally {
      await after.close();
    }
  });

  it('goes on where a killed run stopped, and leaves what does not open for its row as it is, saying so', async () => {
    const t = await buildTestApp(BROKER_ENV, { database });
    const owner = await register(t.app);
    const other = await register(t.app);
    const [mine, theirs] = await Promise.all([
      insertTrigger(database, owner.installationId),
      insertTrigger(database, other.installationId),
    ]);
    const ids = [];
    for (let n = 0; n < 6; n++) ids.push(await accepted(t, mine, { n }));
    const copied = await accepted(t, theirs, { n: 'theirs' });
    // One of the broker's own events, which its database functions write in clear and the broker
    // seals right after; stored in clear again, as a process stopped before it sealed it leaves it.
    const expired = signed(accountExpired(mine.composioUserId, mine.connectedAccountId), { at: t.clock.now() });
    expect((await post(t, expired)).statusCode).toBe(200);
    await until(
      async () => (await database.sql`select sealed is not null as sealed from events where id = ${expired.id}`)[0]?.sealed === true,
      5_000,
      'the broker’s own event sealed',
    );
    const queued = (await getEvents(t, owner.auth, { limit: 100 })).json<{ events: Array<{ type: string; data: unknown }> }>().events;
    const expiredData = queued.find((e) => e.type === 'connection.expired')!.data;
    await database.sql`update events set data = ${JSON.stringify(expiredData)}::text::jsonb, sealed = null where id = ${expired.id}`;
    const [own] = await database.sql<{ type: string; data: unknown }[]>`
      select type, data from events where installation_id = ${owner.installationId} and type <> 'trigger.event'`;
    expect(own).toMatchObject({ type: 'connection.expired', data: expect.any(Object) });
    await t.close();
    // A sealed value moved into another installation's row: it never opens there.
    await database.sql`update events set sealed = (select sealed from events where id = ${ids[0]!}) where id = ${copied}`;

    const keys = dataKeys(NEW_KEYS);
    const stop = new AbortController();
    const killed = rotateEventData(database.sql, keys, { batchSize: 2, onBatch: () => stop.abort(), signal: stop.signal });
    await expect(killed).rejects.toThrow();
    const done = await runCli(['data-keys', 'rotate', '--batch', '3'], { DATABASE_URL: database.url, DATA_ENCRYPTION_KEYS: NEW_KEYS });
    expect(done.code).toBe(1);
    expect(done.stdout).toContain('1 could not be decrypted with the keys given: left as they are');
    expect(done.stderr).toContain('rotating events');
    expect(await keyIdsOfEvents(owner.installationId)).toEqual(Array(7).fill('fresh'));
    expect(await keyIdsOfEvents(other.installationId)).toEqual(['test']);
    // The broker's own event is sealed too, and read back as it was written.
    const reader = await buildTestApp({ ...BROKER_ENV, DATA_ENCRYPTION_KEYS: NEW_KEYS }, { database });
    try {
      const events = (await getEvents(reader, owner.auth, { limit: 100 })).json<{ events: Array<{ type: string; data: unknown }> }>()
        .events;
      expect(events.find((e) => e.type === 'connection.expired')?.data).toEqual(own!.data);
    } finally {
      await reader.close();
    }
    // The old key still protects that value: it stays in use.
    expect((await database.sql`select key_id from data_keys_in_use order by key_id`).map((r) => r.key_id)).toEqual(['fresh', 'test']);
  });
});

describe('trigger events stored in clear beside a broker of the previous release', () => {
  it('are sealed in the background once the previous release has gone, and still read as they were', async () => {
    // A 0.1.0 broker's connection, there while this process starts: it stores in clear.
    const previous = postgres(database.url, { max: 1, connection: { application_name: PREVIOUS_RELEASE_APPLICATION_NAMES[0] } });
    await previous`select 1`;
    const lines: string[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(line) });
    const events = createEventsRuntime({
      database,
      logger,
      dataKeys: dataKeys(TEST_DATA_KEYS),
      sealingChecks: { checkEveryMs: 50, settleMs: 300 },
    });
    const t = await buildTestApp(BROKER_ENV, { database, events });
    try {
      expect(events.sealing!.sealing()).toBe(false);
      const owner = await register(t.app);
      const trigger = await insertTrigger(database, owner.installationId);
      for (let n = 0; n < 5; n++) await accepted(t, trigger, { n });
      expect(
        (await database.sql`select count(*)::int as n from events where installation_id = ${owner.installationId} and sealed is null`)[0]!
          .n,
      ).toBe(5);

      await previous.end();
      await until(
        () => lines.some((line) => line.includes('events stored in clear are now encrypted')),
        10_000,
        'the pass over the events stored in clear',
      );
      expect(await keyIdsOfEvents(owner.installationId)).toEqual(Array(5).fill('test'));
      const read = (await getEvents(t, owner.auth, { limit: 100 })).json<{ events: Array<{ data: unknown }> }>().events;
      expect(read.map((e) => e.data)).toEqual(Array.from({ length: 5 }, (_, n) => ({ n })));
    } finally {
      await previous.end();
      await t.close();
    }
  });
});

describe('a broker still sealing under a key a rotation retired', () => {
  it('records it in use again at its next look, so that no broker starts without it', async () => {
    const sealing = new Sealing(dataKeys(TEST_DATA_KEYS), database.sql, createLogger('silent'), { checkEveryMs: 50, settleMs: 0 });
    await sealing.start();
    try {
      expect(sealing.sealing()).toBe(true);
      await database.sql`delete from data_keys_in_use where key_id = 'test'`;
      await until(
        async () => (await database.sql`select 1 from data_keys_in_use where key_id = 'test'`).length === 1,
        5_000,
        'the key recorded in use again',
      );
    } finally {
      sealing.stop();
    }
  });
});
