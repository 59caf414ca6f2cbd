import { randomUUID } from 'node:crypto';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PREVIOUS_RELEASE_APPLICATION_NAMES } from '../../src/db/database.js';
import { createMetrics } from '../../src/metrics/metrics.js';
import { quotaDay } from '../../src/plans/plan.js';
import { queueTriggerTest } from '../../src/triggers/test-event.js';
import { runCli } from '../operators/support.js';
import { buildTestApp, register, type TestApp } from '../support/app.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { until } from '../support/http.js';
import {
  accountExpired,
  BROKER_ENV,
  buildEventsApp,
  type EventsTestApp,
  getEvents,
  insertTrigger,
  post,
  SECRET,
  signed,
  type TestTrigger,
  triggerMessage,
} from './helpers.js';

/**
 * Trigger events' data is stored encrypted (src/events/sealing.ts): no table holds its text, a
 * poll hands back the delivery's own text of `data` byte for byte, and a sealed value moved into
 * another installation's row never opens there. While a broker of the previous release is
 * connected, data is stored in clear, as that release reads it.
 */

const MARKER = 'private-mail-text-7c1e';

/** A trigger message whose `data` is the JSON text `dataText`, written by hand (spacing and key order kept). */
function messageWithData(trigger: Parameters<typeof triggerMessage>[0], dataText: string): string {
  return JSON.stringify(triggerMessage(trigger, { PLACEHOLDER: true })).replace('{"PLACEHOLDER":true}', dataText);
}

/** Every row of every table of the database as text, as `pg_dump` writes the data: what a dump would hold. */
async function dumpText(database: Pick<TestDatabase, 'sql'>): Promise<string> {
  const tables = await database.sql<{ name: string }[]>`
    select format('%I.%I', schemaname, tablename) as name from pg_tables where schemaname not in ('pg_catalog', 'information_schema')`;
  let text = '';
  for (const { name } of tables) {
    const rows = await database.sql.unsafe(`select t::text as row from ${name} t`);
    text += rows.map((r) => String(r.row)).join('\n');
  }
  return text;
}

function occurrences(text: string, needle: string): number {
  return text.split(needle).length - 1;
}

describe('trigger events’ data at rest', () => {
  // The app makes its own events runtime, logging where the test reads.
  let t: TestApp;
  const metrics = createMetrics({ defaultMetrics: false });
  const unreadable = async () => (await metrics.eventsUnreadable.get()).values[0]?.value ?? 0;
  beforeAll(async () => {
    t = await buildTestApp(BROKER_ENV, { metrics });
  });
  afterAll(() => t.close());

  it('is sealed in the table, and handed back byte for byte as sent', async () => {
    const owner = await register(t.app);
    const trigger = await insertTrigger(t.database, owner.installationId);
    const dataText = `{ "subject" : "${MARKER}",  "amount":1.50, "id": 123456789012345678901234567890, "z":{}, "a" : [ ] }`;
    const webhook = signed(messageWithData(trigger, dataText), { at: t.clock.now() });
    expect((await post(t, webhook)).json()).toEqual({ outcome: 'accepted' });

    const [row] = await t.database.sql<{ data: unknown; sealed: Buffer | null }[]>`
      select data, sealed from events where installation_id = ${owner.installationId} and id = ${webhook.id}`;
    expect(row!.data).toBeNull();
    expect(row!.sealed).toBeInstanceOf(Buffer);
    expect(row!.sealed!.includes(Buffer.from(MARKER))).toBe(false);

    const answer = await getEvents(t, owner.auth);
    expect(answer.statusCode).toBe(200);
    expect(answer.body).toContain(`"data":${dataText}}`);
  });

  it('leaves no event text and no webhook signing secret in what a dump of the database holds', async () => {
    const owner = await register(t.app);
    const trigger = await insertTrigger(t.database, owner.installationId);
    for (let n = 0; n < 5; n++) {
      const webhook = signed(messageWithData(trigger, `{"body":"${MARKER} ${n}"}`), { at: t.clock.now() });
      expect((await post(t, webhook)).json()).toEqual({ outcome: 'accepted' });
    }
    // The broker's COMPOSIO_WEBHOOK_SECRET, stored as accepted at its start, is sealed once it seals.
    await until(async () => occurrences(await dumpText(t.database), SECRET) === 0, 5_000, 'the webhook secret sealed');
    const dump = await dumpText(t.database);
    expect(occurrences(dump, MARKER)).toBe(0);
    expect(occurrences(dump, SECRET)).toBe(0);
    expect((await t.database.sql`select count(*)::int as n from webhook_secrets where sealed is not null`)[0]!.n).toBe(1);
    // Still accepted: a delivery signed with it is taken.
    const signedWithIt = signed(messageWithData(trigger, '{"n":"after sealing"}'), { at: t.clock.now() });
    expect((await post(t, signedWithIt)).json()).toEqual({ outcome: 'accepted' });
  });

  it('keeps statements’ parameters, which carry the clear data to the filter, out of the embedded Postgres’s log', async () => {
    const [setting] = await t.database.sql<{ log_parameter_max_length: string }[]>`show log_parameter_max_length`;
    expect(setting!.log_parameter_max_length).toBe('0');
    const [onError] = await t.database.sql<{ log_parameter_max_length_on_error: string }[]>`show log_parameter_max_length_on_error`;
    expect(onError!.log_parameter_max_length_on_error).toBe('0');
  });

  it('never opens in another installation’s row: the poll answers the others, logs and counts it', async () => {
    const a = await register(t.app);
    const b = await register(t.app);
    const [ta, tb] = await Promise.all([insertTrigger(t.database, a.installationId), insertTrigger(t.database, b.installationId)]);
    const fromA = signed(messageWithData(ta, `{"for":"a"}`), { at: t.clock.now() });
    const firstOfB = signed(messageWithData(tb, `{"for":"b","n":1}`), { at: t.clock.now() });
    const secondOfB = signed(messageWithData(tb, `{"for":"b","n":2}`), { at: t.clock.now() });
    for (const webhook of [fromA, firstOfB, secondOfB]) expect((await post(t, webhook)).json()).toEqual({ outcome: 'accepted' });

    // Someone with the database's keys to the rows, not to the data keys, moves A's event into B's first.
    await t.database.sql`
      update events set sealed = (select sealed from events where installation_id = ${a.installationId} and id = ${fromA.id})
       where installation_id = ${b.installationId} and id = ${firstOfB.id}`;
    const before = await unreadable();

    const answer = await getEvents(t, b.auth);
    expect(answer.statusCode).toBe(200);
    const batch = answer.json<{ events: Array<{ id: string; data: unknown }> }>();
    expect(batch.events.map((e) => e.id)).toEqual([secondOfB.id]);
    expect(batch.events[0]!.data).toEqual({ for: 'b', n: 2 });
    expect(answer.body).not.toContain('"for":"a"');

    const line = t.logs.lines.find((l) => l.includes('does not decrypt for its row'));
    expect(line).toContain(firstOfB.id);
    expect(line).toContain(b.installationId);
    expect(await unreadable()).toBe(before + 1);
    // Alone in its queue, a value that does not open is passed over: no gap, counted once.
    const c = await register(t.app);
    const tc = await insertTrigger(t.database, c.installationId);
    const onlyOfC = signed(messageWithData(tc, `{"for":"c"}`), { at: t.clock.now() });
    expect((await post(t, onlyOfC)).json()).toEqual({ outcome: 'accepted' });
    await t.database.sql`update events set sealed = (select sealed from events where id = ${fromA.id}) where id = ${onlyOfC.id}`;
    const alone = await getEvents(t, c.auth);
    expect(alone.json()).toEqual({ events: [], cursor: expect.any(String) });
    expect(await unreadable()).toBe(before + 2);
    // A's own event still opens in A's row.
    expect((await getEvents(t, a.auth)).json<{ events: Array<{ data: unknown }> }>().events[0]!.data).toEqual({ for: 'a' });
  });
});

/** Queued outside any webhook's `data`, by the database functions the previous release shares. */
const BROKER_MADE = ['quota.exceeded', 'trigger.test', 'trigger.disabled', 'connection.expired'];

/** The apps' daily quota of kept events, which queueEveryKind goes over. */
const QUOTA = 2;
const TRIGGER_EVENTS = Array(QUOTA).fill('trigger.event');

/**
 * The installation's quota of trigger events, then one event of each kind the broker makes: the
 * day's `quota.exceeded`, a test event, its trigger stopped by Composio,
 * its account expired.
 */
async function queueEveryKind(t: EventsTestApp, installationId: string): Promise<TestTrigger> {
  const trigger = await insertTrigger(t.database, installationId);
  for (let n = 0; n <= QUOTA; n++) await post(t, signed(triggerMessage(trigger, { n }), { at: t.clock.now() }));
  const tests = { db: t.database.db, types: { peek: () => undefined }, notifier: t.events.notifier, testsPerDay: 5 };
  await queueTriggerTest(tests, installationId, trigger.id, t.clock.now());
  const stop = { trigger_id: trigger.composioTriggerId, disabled_reason: 'subscription_auth_failure' };
  const disabled = {
    id: randomUUID(),
    timestamp: t.clock.now().toISOString(),
    type: 'composio.trigger.disabled',
    metadata: {},
    data: stop,
  };
  expect((await post(t, signed(disabled, { at: t.clock.now() }))).json()).toEqual({ outcome: 'accepted' });
  // Its account, which a stopped trigger no longer needs, expires.
  expect((await post(t, signed(accountExpired(trigger.composioUserId, trigger.connectedAccountId), { at: t.clock.now() }))).json()).toEqual(
    {
      outcome: 'accepted',
    },
  );
  return trigger;
}

/** How each of the installation's events is stored, in its queue's order. */
function storedEvents(t: EventsTestApp, installationId: string) {
  return t.database.sql<{ type: string; sealed: boolean; clear: boolean }[]>`
    select type, sealed is not null as sealed, data is not null as clear
      from events where installation_id = ${installationId} order by position`;
}

describe('the broker’s own events and test events at rest', () => {
  let t: EventsTestApp;
  beforeAll(async () => {
    t = await buildEventsApp({ QUOTA_STANDARD: String(QUOTA) });
  });
  afterAll(() => t.close());

  it('are sealed right after they are queued, and read back as they were written', async () => {
    const owner = await register(t.app);
    const trigger = await queueEveryKind(t, owner.installationId);
    await until(
      async () => (await storedEvents(t, owner.installationId)).every((row) => row.sealed && !row.clear),
      5_000,
      'every event sealed',
    );
    expect((await storedEvents(t, owner.installationId)).map((row) => row.type)).toEqual([...TRIGGER_EVENTS, ...BROKER_MADE]);
    const read = (await getEvents(t, owner.auth, { limit: 100 })).json<{ events: Array<{ type: string; data: unknown }> }>().events;
    const data = Object.fromEntries(read.map((e) => [e.type, e.data]));
    expect(data).toEqual({
      'trigger.event': { n: QUOTA - 1 },
      'quota.exceeded': { day: quotaDay(t.clock.now()).day, eventsPerDay: QUOTA, resetsAt: quotaDay(t.clock.now()).resetsAt.toISOString() },
      'trigger.test': {},
      'trigger.disabled': { reason: 'subscription_auth_failure', status: 'disabled_by_composio' },
      'connection.expired': expect.objectContaining({ connectedAccountId: trigger.connectedAccountId, toolkit: 'github' }),
    });
  });

  it('seals what the installation still has in clear at its next such event, and nothing of another installation', async () => {
    const owner = await register(t.app);
    const other = await register(t.app);
    const [mine, theirs] = await Promise.all([
      insertTrigger(t.database, owner.installationId),
      insertTrigger(t.database, other.installationId),
    ]);
    for (const trigger of [mine, theirs]) {
      expect((await post(t, signed(triggerMessage(trigger, { left: 'in clear' }), { at: t.clock.now() }))).json()).toEqual({
        outcome: 'accepted',
      });
    }
    // Each left in clear, as a process stopped before it sealed them leaves them.
    await t.database.sql`update events set data = '{"left": "in clear"}', sealed = null
                          where installation_id in (${owner.installationId}, ${other.installationId})`;

    const tests = { db: t.database.db, types: { peek: () => undefined }, notifier: t.events.notifier, testsPerDay: 5 };
    await queueTriggerTest(tests, owner.installationId, mine.id, t.clock.now());
    await until(
      async () => (await storedEvents(t, owner.installationId)).every((row) => row.sealed && !row.clear),
      5_000,
      'the installation’s events sealed',
    );
    expect(await storedEvents(t, owner.installationId)).toEqual([
      { type: 'trigger.event', sealed: true, clear: false },
      { type: 'trigger.test', sealed: true, clear: false },
    ]);
    expect(await storedEvents(t, other.installationId)).toEqual([{ type: 'trigger.event', sealed: false, clear: true }]);
    const dataOf = async (auth: { authorization: string }) =>
      (await getEvents(t, auth, { limit: 100 })).json<{ events: Array<{ data: unknown }> }>().events.map((e) => e.data);
    expect(await dataOf(owner.auth)).toEqual([{ left: 'in clear' }, {}]);
    expect(await dataOf(other.auth)).toEqual([{ left: 'in clear' }]);
  });
});

describe('npm run cli -- data-keys status', () => {
  it('counts the values each key protects and those in clear, with the keys in use', async () => {
    const database = await createTestDatabase();
    const t = await buildTestApp(BROKER_ENV, { database });
    try {
      const owner = await register(t.app);
      const trigger = await insertTrigger(t.database, owner.installationId);
      for (let n = 0; n < 3; n++) {
        expect((await post(t, signed(messageWithData(trigger, `{"n":${n}}`), { at: t.clock.now() }))).json()).toEqual({
          outcome: 'accepted',
        });
      }
      // One stored as the previous release stores it.
      await database.sql`update events set data = '{"n":0}', sealed = null
                          where position = 1 and installation_id = ${owner.installationId}`;
      // The broker's webhook secret, sealed once it seals.
      await until(
        async () => (await database.sql`select count(*)::int as n from webhook_secrets where sealed is not null`)[0]!.n === 1,
        5_000,
        'the webhook secret sealed',
      );
      const json = await runCli(['data-keys', 'status', '--json'], { DATABASE_URL: database.url });
      expect(json).toMatchObject({ code: 0 });
      expect(JSON.parse(json.stdout)).toEqual({
        sealedEvents: { test: 2 },
        clearEvents: 1,
        sealedWebhookSecrets: { test: 1 },
        clearWebhookSecrets: 0,
        keysInUse: ['test'],
      });
      const text = await runCli(['data-keys', 'status'], { DATABASE_URL: database.url });
      expect(text.stdout).toContain(
        '  events encrypted under test: 2\n  events in clear: 1\n  webhook signing secrets encrypted under test: 1\n  webhook signing secrets in clear: 0\n',
      );
    } finally {
      await t.close();
      await database.drop();
    }
  });
});

describe('beside a broker of the previous release', () => {
  let database: TestDatabase;
  let previous: postgres.Sql;
  let t: EventsTestApp;
  beforeAll(async () => {
    database = await createTestDatabase();
    // What a 0.1.0 broker's LISTEN connection calls itself.
    previous = postgres(database.url, { max: 1, connection: { application_name: PREVIOUS_RELEASE_APPLICATION_NAMES[2] } });
    await previous`select 1`;
    t = await buildEventsApp({ QUOTA_STANDARD: String(QUOTA) }, { database });
  });
  afterAll(async () => {
    await t?.close();
    await previous?.end();
    await database?.drop();
  });

  it('stores data in clear, as that release reads it, and serves it', async () => {
    const owner = await register(t.app);
    const trigger = await insertTrigger(t.database, owner.installationId);
    const webhook = signed(messageWithData(trigger, '{"n":1}'), { at: t.clock.now() });
    expect((await post(t, webhook)).json()).toEqual({ outcome: 'accepted' });
    const [row] = await database.sql<{ data: unknown; sealed: Buffer | null }[]>`
      select data, sealed from events where id = ${webhook.id}`;
    expect(row).toEqual({ data: { n: 1 }, sealed: null });
    expect((await getEvents(t, owner.auth)).json<{ events: Array<{ data: unknown }> }>().events[0]!.data).toEqual({ n: 1 });
    // As jsonb holds it: what it cannot (NUL) becomes U+FFFD, as it did before encryption.
    const nul = signed(messageWithData(trigger, '{"text":"a\\u0000b"}'), { at: t.clock.now() });
    expect((await post(t, nul)).json()).toEqual({ outcome: 'accepted' });
    const [stored] = await database.sql<{ data: unknown }[]>`select data from events where id = ${nul.id}`;
    expect(stored!.data).toEqual({ text: 'a\uFFFDb' });
  });
  it('leaves the broker’s own events and test events in clear too', async () => {
    const owner = await register(t.app);
    await queueEveryKind(t, owner.installationId);
    // What a sealing process would have sealed by now (a few milliseconds after each append).
    await new Promise((resolve) => setTimeout(resolve, 300));
    const stored = await storedEvents(t, owner.installationId);
    expect(stored.map((row) => row.type)).toEqual([...TRIGGER_EVENTS, ...BROKER_MADE]);
    expect(stored.every((row) => row.clear && !row.sealed)).toBe(true);
  });
});
