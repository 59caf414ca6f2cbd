import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/database.js';
import { applyMigrations } from '../../src/db/migrate.js';
import { createLogger } from '../../src/logger.js';
import { buildTestApp, register, type TestApp } from '../support/app.js';
import type { TestDatabase } from '../support/database.js';
import { type DebianPostgres, startDebianPostgres } from '../support/debian-postgres.js';
import { until } from '../support/http.js';
import { BROKER_ENV, insertTrigger, post, SECRET, signed, triggerMessage } from './helpers.js';

/**
 * What `pg_dump` writes of a broker's database: no event's text and no webhook signing secret.
 * Debian's Postgres 15 and its `pg_dump` (the embedded Postgres ships no `pg_dump`, and a
 * `pg_dump` refuses a server newer than itself), with the broker migrated onto it as onto any
 * external Postgres.
 */

const MARKER = 'private-mail-text-d41f';
const WEBHOOKS = 5;

const occurrences = (text: string, needle: string) => text.split(needle).length - 1;

describe('pg_dump of a database with queued events and stored secrets', () => {
  let server: DebianPostgres;
  let database: TestDatabase;
  let t: TestApp;

  beforeAll(async () => {
    server = await startDebianPostgres();
    const url = server.url();
    await applyMigrations(url, createLogger('silent'));
    const opened = openDatabase({ url, poolSize: 4, logger: createLogger('silent') });
    database = { ...opened, name: 'postgres', drop: () => opened.close() };
    t = await buildTestApp(BROKER_ENV, { database });
  }, 60_000);

  afterAll(async () => {
    await t?.close();
    await database?.close();
    await server?.stop();
  });

  it('holds no event text and no secret: the marker and the secret are counted 0 times', async () => {
    const owner = await register(t.app);
    const trigger = await insertTrigger(database, owner.installationId);
    const ids: string[] = [];
    for (let n = 0; n < WEBHOOKS; n++) {
      const webhook = signed(triggerMessage(trigger, { subject: `${MARKER} ${n}`, body: `${MARKER} body` }), { at: t.clock.now() });
      expect((await post(t, webhook)).json()).toEqual({ outcome: 'accepted' });
      ids.push(webhook.id);
    }
    // The broker's COMPOSIO_WEBHOOK_SECRET, stored as accepted at its start, is sealed once it seals.
    await until(
      async () => (await database.sql`select count(*)::int as n from webhook_secrets where secret is not null`)[0]!.n === 0,
      5_000,
      'the webhook secret sealed',
    );

    const dump = await server.dump('postgres');
    process.stdout.write(
      `pg_dump (Postgres 15): ${dump.length.toLocaleString('en-US')} characters, ${ids.length} events; ` +
        `the events' marker ${occurrences(dump, MARKER)} times, the webhook secret ${occurrences(dump, SECRET)} times\n`,
    );
    // The dump holds the rows: every event by its id, and the sealed secret's row.
    for (const id of ids) expect(occurrences(dump, id), id).toBe(1);
    expect(dump).toMatch(/COPY public\.webhook_secrets /);
    expect(occurrences(dump, MARKER)).toBe(0);
    expect(occurrences(dump, SECRET)).toBe(0);
  });
});
