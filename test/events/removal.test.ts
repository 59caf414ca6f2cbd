import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEventsRuntime, type EventsRuntime } from '../../src/events/runtime.js';
import { createLogger } from '../../src/logger.js';
import { type Harness, startHarness } from '../composio/harness.js';
import { buildTestApp, register, type TestApp } from '../support/app.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { until } from '../support/http.js';
import { BROKER_ENV, getEvents } from './helpers.js';

/**
 * `DELETE /v1/me` while the installation holds long polls: two brokers (apps) on one database and
 * one Composio simulator, so the removal reaches the polls held by the broker that served it and
 * by the other one.
 */

interface Broker extends TestApp {
  events: EventsRuntime;
}

let h: Harness;
let database: TestDatabase;
let a: Broker;
let b: Broker;

async function broker(): Promise<Broker> {
  const events = createEventsRuntime({ database, logger: createLogger('silent') });
  return { ...(await buildTestApp(BROKER_ENV, { database, events, composio: h.gateway })), events };
}

beforeAll(async () => {
  h = await startHarness();
  database = await createTestDatabase();
  a = await broker();
  b = await broker();
});
afterAll(async () => {
  await Promise.all([a?.close(), b?.close()]);
  await database?.drop();
  await h?.close();
});

describe('DELETE /v1/me', () => {
  it('ends the installation’s waiting polls at once with 401, on this broker and on the other', async () => {
    const leaving = await register(a.app);
    const staying = await register(a.app);
    const here = getEvents(a, leaving.auth, { wait: 20 });
    const there = getEvents(b, leaving.auth, { wait: 20 });
    const untouched = getEvents(b, staying.auth, { wait: 2 });
    await until(() => a.events.hub.size === 1 && b.events.hub.size === 2, 5_000, 'the polls waiting');

    const removed = await a.app.inject({ method: 'DELETE', url: '/v1/me', headers: leaving.auth });
    expect(removed.statusCode).toBe(204);
    const removedAt = performance.now();

    for (const answer of await Promise.all([here, there])) {
      expect(answer.statusCode).toBe(401);
      expect(answer.json()).toEqual({ error: expect.any(String), code: 'unauthorized' });
    }
    expect(performance.now() - removedAt).toBeLessThan(1_000);
    expect(a.events.hub.size).toBe(0);
    // Another installation's poll waits on, and ends as its wait does.
    expect(b.events.hub.size).toBe(1);
    expect((await untouched).statusCode).toBe(200);
  });
});
