import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../src/db/database.js';
import { type BrokerProcess, startBroker } from '../support/broker-process.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { registerOver, until } from '../support/http.js';
import { BROKER_ENV, buildEventsApp, type EventsTestApp, insertTrigger, signed, type TestTrigger, triggerMessage } from './helpers.js';

/**
 * The queue's promise under concurrency, over real HTTP: many webhooks for ONE installation
 * committing at once while a client long-polls and acknowledges with the cursor. Every accepted
 * event must arrive exactly once, in acceptance order, none missing.
 */

const WEBHOOKS = 300;
const cleanups: Array<() => Promise<unknown>> = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
});

type Batch = { events: Array<{ id: string }>; cursor: string };

/** The ids of the installation's stored events. */
async function storedIds(database: Pick<Database, 'sql'>, installationId: string): Promise<string[]> {
  const rows = await database.sql<{ id: string }[]>`select id from events where installation_id = ${installationId}`;
  return rows.map((row) => row.id);
}

async function postWebhook(url: string, trigger: TestTrigger, n: number): Promise<{ id: string; status: number; outcome?: string }> {
  const webhook = signed(triggerMessage(trigger, { n }));
  const response = await fetch(`${url}/v1/webhooks/composio`, { method: 'POST', headers: webhook.headers, body: webhook.body });
  const body = (await response.json()) as { outcome?: string };
  return { id: webhook.id, status: response.status, outcome: body.outcome };
}

/** Long-polls with small batches, acknowledging with each cursor, until `done()` and the queue is drained. */
async function consume(url: string, auth: { authorization: string }, done: () => boolean): Promise<string[]> {
  const received: string[] = [];
  let cursor: string | undefined;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (Date.now() > deadline) throw new Error(`consumer timed out with ${received.length} events`);
    const finished = done();
    const query = new URLSearchParams({ limit: '17', wait: finished ? '0' : '2', ...(cursor ? { cursor } : {}) });
    const response = await fetch(`${url}/v1/events?${query}`, { headers: auth });
    expect(response.status).toBe(200);
    const batch = (await response.json()) as Batch;
    received.push(...batch.events.map((e) => e.id));
    cursor = batch.cursor;
    if (finished && batch.events.length === 0) return received;
  }
}

async function positionsOrder(database: Pick<Database, 'sql'>, installationId: string): Promise<string[]> {
  const rows = await database.sql<{ id: string }[]>`select id from events where installation_id = ${installationId} order by position`;
  return rows.map((r) => r.id);
}

function expectExactlyOnceInOrder(received: string[], accepted: string[], inPositionOrder: string[]): void {
  expect(new Set(received).size, 'no event received twice').toBe(received.length);
  expect([...received].sort(), 'every accepted event received, nothing else').toEqual([...accepted].sort());
  expect(received, 'in acceptance (position) order').toEqual(inPositionOrder);
}

describe('one broker process', () => {
  let t: EventsTestApp;
  let url: string;
  beforeAll(async () => {
    t = await buildEventsApp({ QUOTA_STANDARD: '100000' });
    cleanups.push(() => t.close());
    url = await t.app.listen({ port: 0, host: '127.0.0.1' });
  });

  it(`delivers ${WEBHOOKS} concurrent webhooks for one installation exactly once, in order`, async () => {
    const owner = await registerOver(url);
    const trigger = await insertTrigger(t.database, owner.installationId);
    let sent = false;
    const consumer = consume(url, owner.auth, () => sent);
    const results = await Promise.all(Array.from({ length: WEBHOOKS }, (_, n) => postWebhook(url, trigger, n)));
    sent = true;
    expect(results.every((r) => r.status === 200 && r.outcome === 'accepted')).toBe(true);
    const received = await consumer;
    expectExactlyOnceInOrder(
      received,
      results.map((r) => r.id),
      await positionsOrder(t.database, owner.installationId),
    );
  });

  it('stores once, and goes on serving, webhooks whose senders hung up as soon as they were sent', async () => {
    const owner = await registerOver(url);
    const trigger = await insertTrigger(t.database, owner.installationId);
    const { port } = new URL(url);
    const hangUps = Array.from({ length: 20 }, (_, n) => {
      // Every tenth one wrongly signed: refused, counted against the sender's address, never a crash.
      const webhook = signed(triggerMessage(trigger, { n }), n % 10 === 9 ? { secret: 'whsec_not_the_one' } : {});
      const head = Object.entries({
        ...webhook.headers,
        host: `127.0.0.1:${port}`,
        'content-length': String(Buffer.byteLength(webhook.body)),
      })
        .map(([name, value]) => `${name}: ${value}\r\n`)
        .join('');
      return new Promise<string>((resolve, reject) => {
        const socket = connect(Number(port), '127.0.0.1', () => {
          socket.end(`POST /v1/webhooks/composio HTTP/1.1\r\n${head}\r\n${webhook.body}`, () => {
            socket.destroy();
            resolve(webhook.id);
          });
        });
        socket.on('error', reject);
      });
    });
    const ids = await Promise.all(hangUps);
    const stored = ids.filter((_, n) => n % 10 !== 9);
    await until(async () => (await storedIds(t.database, owner.installationId)).length >= stored.length, 5_000, 'the webhooks stored');
    expect((await storedIds(t.database, owner.installationId)).sort()).toEqual([...stored].sort());
    expect((await postWebhook(url, trigger, 99)).outcome).toBe('accepted');
  });

  it('removes a disconnected client’s waiter at once', async () => {
    const owner = await registerOver(url);
    const client = httpRequest(`${url}/v1/events?wait=25`, { headers: owner.auth });
    client.on('error', () => undefined);
    client.end();
    await until(() => t.events.hub.size === 1, 5_000);
    client.destroy();
    const started = performance.now();
    await until(() => t.events.hub.size === 0, 5_000);
    expect(performance.now() - started).toBeLessThan(200);
  });
});

/**
 * Two broker processes on one database, started once for the file: the durability test kills
 * one of them last (broker starts are most of this file's time).
 */
interface OneDatabase {
  database: TestDatabase;
  env: Record<string, string>;
  a: BrokerProcess;
  b: BrokerProcess;
}
let oneDatabase: Promise<OneDatabase> | undefined;
function twoBrokersOnOneDatabase(): Promise<OneDatabase> {
  oneDatabase ??= (async () => {
    const database = await createTestDatabase();
    cleanups.push(() => database.drop());
    const env = { ...BROKER_ENV, DATABASE_URL: database.url, QUOTA_STANDARD: '100000' };
    const [a, b] = await Promise.all([startBroker(env), startBroker(env)]);
    cleanups.push(
      () => a.stop(),
      () => b.stop(),
    );
    return { database, env, a, b };
  })();
  return oneDatabase;
}

describe('two broker processes on one database', () => {
  let database: TestDatabase;
  let a: BrokerProcess;
  let b: BrokerProcess;
  beforeAll(async () => {
    ({ database, a, b } = await twoBrokersOnOneDatabase());
  }, 60_000);

  it(`delivers ${WEBHOOKS} concurrent webhooks sent to one and polled on the other exactly once, in order`, async () => {
    const owner = await registerOver(a.url);
    const trigger = await insertTrigger(database, owner.installationId);
    let sent = false;
    const consumer = consume(b.url, owner.auth, () => sent);
    const results = await Promise.all(Array.from({ length: WEBHOOKS }, (_, n) => postWebhook(a.url, trigger, n)));
    sent = true;
    expect(results.every((r) => r.status === 200 && r.outcome === 'accepted')).toBe(true);
    const received = await consumer;
    expectExactlyOnceInOrder(
      received,
      results.map((r) => r.id),
      await positionsOrder(database, owner.installationId),
    );
  });

  it('wakes a poll on one within milliseconds of a webhook accepted by the other', async () => {
    const owner = await registerOver(a.url);
    const trigger = await insertTrigger(database, owner.installationId);
    const waiting = fetch(`${b.url}/v1/events?wait=20`, { headers: owner.auth });
    await new Promise((resolve) => setTimeout(resolve, 300));
    const sentAt = performance.now();
    const { id } = await postWebhook(a.url, trigger, 1);
    const batch = (await (await waiting).json()) as Batch;
    expect(batch.events.map((e) => e.id)).toEqual([id]);
    expect(performance.now() - sentAt).toBeLessThan(500);
  });
});

describe('durability', () => {
  it('keeps every webhook that got 200 across a kill -9 of the broker and a restart', async () => {
    // One of the two processes above, killed last; its webhooks are its own installation's.
    const { database, env, b: broker } = await twoBrokersOnOneDatabase();
    const owner = await registerOver(broker.url);
    const trigger = await insertTrigger(database, owner.installationId);

    // Kill the broker the moment the first answers come back, with more in flight.
    const acknowledged: string[] = [];
    let killed: Promise<number | null> | undefined;
    await Promise.all(
      Array.from({ length: 60 }, async (_, n) => {
        try {
          const result = await postWebhook(broker.url, trigger, n);
          if (result.status === 200 && result.outcome === 'accepted') acknowledged.push(result.id);
          if (acknowledged.length >= 10) killed ??= broker.stop('SIGKILL');
        } catch {
          // In flight when the broker died: never answered, so Composio would deliver it again.
        }
      }),
    );
    await killed;
    expect(acknowledged.length).toBeGreaterThanOrEqual(10);

    const restarted = await startBroker(env);
    cleanups.push(() => restarted.stop());
    const received = await consume(restarted.url, owner.auth, () => true);
    for (const id of acknowledged) expect(received).toContain(id);
    expect(new Set(received).size).toBe(received.length);
  }, 60_000);
});
