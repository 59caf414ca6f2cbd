import { randomBytes, randomUUID } from 'node:crypto';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { drizzle } from 'drizzle-orm/postgres-js';
import { migrate } from 'drizzle-orm/postgres-js/migrator';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { openDatabase } from '../../src/db/database.js';
import { applyMigrations, MIGRATIONS_FOLDER } from '../../src/db/migrate.js';
import { encodeCursor } from '../../src/events/queue/cursor.js';
import { dropExpiredDays } from '../../src/events/retention/retention.js';
import { hashToken } from '../../src/installations/tokens.js';
import { createLogger } from '../../src/logger.js';
import { type TestDatabase, withDatabase } from '../support/database.js';
import { buildEventsApp, type EventsTestApp, insertTrigger, signed, type TestTrigger, triggerMessage } from './helpers.js';

/**
 * The upgrade to day partitions (migrations/0011_events_by_day.sql), from the schema before it
 * with events in it: every event is still read in order, every cursor handed out before still
 * works, a queue that retention had cut still says `gap`, and new events go on from there.
 */

/** The last migration before events were partitioned. */
const BEFORE_PARTITIONS = '0005_ingest_reads_the_plan_and_names_what_it_queued';
const HOUR = 3_600_000;

interface OldInstallation {
  id: string;
  token: string;
  trigger: TestTrigger;
  /** Event ids by position (1-based; index 0 unused). */
  ids: string[];
}

let database: TestDatabase;
let t: EventsTestApp;
let folder: string;
const installations: OldInstallation[] = [];
const now = new Date();

/** A database migrated only up to BEFORE_PARTITIONS, as a broker of today's main leaves it. */
async function databaseBeforePartitions(): Promise<{ url: string; name: string }> {
  const adminUrl = inject('pgAdminUrl');
  const name = `omb_upgrade_${randomBytes(6).toString('hex')}`;
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`create database ${name}`);
  } finally {
    await admin.end();
  }
  folder = await mkdtemp(path.join(tmpdir(), 'omb-upgrade-'));
  await cp(MIGRATIONS_FOLDER, folder, { recursive: true });
  const journalPath = path.join(folder, 'meta', '_journal.json');
  const journal = JSON.parse(await readFile(journalPath, 'utf8')) as { entries: Array<{ tag: string }> };
  const cut = journal.entries.findIndex((entry) => entry.tag === BEFORE_PARTITIONS);
  expect(cut).toBeGreaterThanOrEqual(0);
  journal.entries = journal.entries.slice(0, cut + 1);
  await writeFile(journalPath, JSON.stringify(journal));
  const url = withDatabase(adminUrl, name);
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await migrate(drizzle(sql), { migrationsFolder: folder });
  } finally {
    await sql.end();
  }
  return { url, name };
}

/** Events as the old ingest function stores them, received over the last three days. */
async function fillOldQueues(sql: postgres.Sql): Promise<void> {
  for (let n = 0; n < 3; n++) {
    const id = randomUUID();
    const token = randomBytes(32).toString('hex');
    await sql`insert into installations (id, token_hash, composio_user_id) values (${id}, ${hashToken(token)}, ${`omb_${id.replaceAll('-', '')}`})`;
    const trigger = await insertTrigger({ sql }, id);
    const ids = [''];
    for (let i = 0; i < 12; i++) {
      const eventId = `msg_${randomUUID()}`;
      const receivedAt = new Date(now.getTime() - (70 - i * 5) * HOUR);
      const [row] = await sql<{ outcome: string }[]>`
        select outcome from omb_ingest_trigger_message(${eventId}, ${trigger.composioTriggerId}, ${trigger.composioUserId},
          ${JSON.stringify({ n: i })}::text::jsonb, ${receivedAt.toISOString()}::timestamptz, ${receivedAt.toISOString().slice(0, 10)}::date,
          false, 100000, 100000)`;
      expect(row!.outcome).toBe('accepted');
      ids.push(eventId);
    }
    installations.push({ id, token, trigger, ids });
  }
  // The first installation acknowledged up to 4; the old retention removed the third one's first 5.
  await sql`update installations set acked_event_position = 4 where id = ${installations[0]!.id}`;
  const cutOff = installations[2]!;
  await sql`delete from events where installation_id = ${cutOff.id} and position <= 5`;
  await sql`insert into event_expiry (installation_id, expired_through_position) values (${cutOff.id}, 5)`;
}

beforeAll(async () => {
  const { url, name } = await databaseBeforePartitions();
  const old = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await fillOldQueues(old);
  } finally {
    await old.end();
  }
  const logger = createLogger('silent');
  await applyMigrations(url, logger);
  const opened = openDatabase({ url, poolSize: 4, logger });
  database = {
    ...opened,
    name,
    async drop() {
      await opened.close();
      const admin = postgres(inject('pgAdminUrl'), { max: 1, onnotice: () => {} });
      try {
        await admin.unsafe(`drop database if exists ${name} with (force)`);
      } finally {
        await admin.end();
      }
    },
  };
  t = await buildEventsApp({ QUOTA_STANDARD: '100000' }, { database });
  t.clock.set(now);
});

afterAll(async () => {
  await t?.close();
  await database?.drop();
  if (folder) await rm(folder, { recursive: true, force: true });
});

type Batch = { events: Array<{ id: string; data: unknown }>; cursor: string; gap?: boolean };

async function poll(installation: OldInstallation, cursor?: string): Promise<Batch> {
  const query = cursor ? `&cursor=${cursor}` : '';
  const response = await t.app.inject({
    method: 'GET',
    url: `/v1/events?wait=0&limit=100${query}`,
    headers: { authorization: `Bearer ${installation.token}` },
  });
  expect(response.statusCode).toBe(200);
  return response.json<Batch>();
}

describe('the upgrade to day partitions', () => {
  it('keeps the old events where they were, in one partition, and drops the old tables and indexes', async () => {
    const partitions = await database.sql<{ name: string; bound: string }[]>`
      select c.relname as name, pg_get_expr(c.relpartbound, c.oid) as bound
        from pg_inherits h join pg_class c on c.oid = h.inhrelid
       where h.inhparent = 'events'::regclass order by c.relname`;
    const names = partitions.map((p) => p.name);
    expect(names).toContain('events_before_days');
    expect(names).toContain('events_default');
    expect(partitions.find((p) => p.name === 'events_before_days')!.bound).toMatch(/^FOR VALUES FROM \(MINVALUE\) TO/);
    const [where] = await database.sql<{ n: number }[]>`
      select count(*)::int as n from events where tableoid = 'events_before_days'::regclass`;
    expect(where!.n).toBe(3 * 12 - 5);
    const [gone] = await database.sql<{ expiry: boolean; index: boolean }[]>`
      select to_regclass('event_expiry') is null as expiry, to_regclass('events_id_idx') is null as index`;
    expect(gone).toEqual({ expiry: true, index: true });
  });

  it('reads every event in order, from the last acknowledged one and from every cursor handed out before', async () => {
    const first = installations[0]!;
    expect((await poll(first)).events.map((e) => e.id)).toEqual(first.ids.slice(5));
    for (let position = 0; position <= 12; position++) {
      const answer = await poll(first, encodeCursor(first.id, position));
      expect(answer.events.map((e) => e.id)).toEqual(first.ids.slice(position + 1));
      expect(answer.gap).toBeUndefined();
    }
    const second = installations[1]!;
    const all = await poll(second);
    expect(all.events.map((e) => e.id)).toEqual(second.ids.slice(1));
    expect(all.events.map((e) => e.data)).toEqual(Array.from({ length: 12 }, (_, n) => ({ n })));
  });

  it('says `gap` where the old retention had removed events, with no event_expiry to ask', async () => {
    const cutOff = installations[2]!;
    expect(await poll(cutOff)).toMatchObject({ gap: true, events: cutOff.ids.slice(6).map((id) => ({ id })) });
    expect(await poll(cutOff, encodeCursor(cutOff.id, 3))).toMatchObject({ gap: true });
    const fromKept = await poll(cutOff, encodeCursor(cutOff.id, 5));
    expect(fromKept.gap).toBeUndefined();
    expect(fromKept.events.map((e) => e.id)).toEqual(cutOff.ids.slice(6));
  });

  it('goes on from the old positions, still knows the old ids, and later drops the old table whole', async () => {
    const second = installations[1]!;
    const redelivered = signed(triggerMessage(second.trigger), { at: t.clock.now(), id: second.ids[12]! });
    const again = await t.app.inject({
      method: 'POST',
      url: '/v1/webhooks/composio',
      headers: redelivered.headers,
      payload: redelivered.body,
    });
    expect(again.json()).toEqual({ outcome: 'duplicate' });

    t.clock.set(new Date(now.getTime() + 26 * HOUR));
    const next = signed(triggerMessage(second.trigger), { at: t.clock.now() });
    const accepted = await t.app.inject({ method: 'POST', url: '/v1/webhooks/composio', headers: next.headers, payload: next.body });
    expect(accepted.json()).toEqual({ outcome: 'accepted' });
    const fromOld = await poll(second, encodeCursor(second.id, 12));
    expect(fromOld.events.map((e) => e.id)).toEqual([next.id]);
    const [row] = await database.sql<{ position: number; partition: string }[]>`
      select position::int, tableoid::regclass::text as partition from events where installation_id = ${second.id} and id = ${next.id}`;
    expect(row!.position).toBe(13);
    expect(row!.partition).not.toBe('events_before_days');

    const dropped = await dropExpiredDays(database.sql, new Date(now.getTime() + 10 * 24 * HOUR));
    expect(dropped.days.some((day) => day.startsWith('before-'))).toBe(true);
    const [left] = await database.sql<{ old: boolean }[]>`select to_regclass('events_before_days') is null as old`;
    expect(left!.old).toBe(true);
  });
});
