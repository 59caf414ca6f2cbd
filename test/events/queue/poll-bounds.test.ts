import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { register } from '../../support/app.js';
import { createTestDatabase, type TestDatabase } from '../../support/database.js';
import { until } from '../../support/http.js';
import { buildEventsApp, countingQueueReads, type EventsTestApp, getEvents, insertTrigger, sendAccepted } from '../helpers.js';

/**
 * What one installation's polls may cost the broker: a few waiting polls at most, a bounded
 * rate, one queue read per wake-up, and only plain decimal numbers for `wait`/`limit`.
 */

let base: TestDatabase;
let t: EventsTestApp;
/** Queue reads through the app's database. */
let queueReads: () => number;

beforeAll(async () => {
  base = await createTestDatabase();
  const counted = countingQueueReads(base.sql);
  queueReads = counted.reads;
  t = await buildEventsApp(
    { EVENT_REQUESTS_PER_MINUTE: '1000', REGISTRATIONS_PER_MINUTE: '1000' },
    { database: { ...base, sql: counted.sql } },
  );
});
afterAll(async () => {
  await t?.app.close();
  await base?.drop();
});

describe('wait and limit', () => {
  it.each(['wait=0x10', 'wait=1e1', 'wait=%2016', 'wait=16.0', 'wait=-0', 'wait=', 'limit=0x10', 'limit=1e1', 'limit=+5', 'limit=5.0'])(
    'refuse %s with 400',
    async (query) => {
      const { auth } = await register(t.app);
      const started = performance.now();
      const response = await getEvents(t, auth, query);
      expect(response.statusCode).toBe(400);
      expect(response.json()).toEqual({ error: expect.any(String), code: expect.any(String) });
      expect(performance.now() - started).toBeLessThan(1000);
    },
  );

  it('take plain decimal integers', async () => {
    const { auth } = await register(t.app);
    const response = await getEvents(t, auth, 'wait=0&limit=010');
    expect(response.statusCode).toBe(200);
    expect(response.json()).toMatchObject({ events: [] });
  });
});

describe('waiting polls per installation', () => {
  it('holds at most 4: a fifth answers the oldest waiting one at once, empty', async () => {
    const { auth } = await register(t.app);
    const other = await register(t.app);
    const otherPoll = getEvents(t, other.auth, 'wait=2');
    await until(() => t.events.hub.size === 1);

    const answered: number[] = [];
    const started: Array<Promise<unknown>> = [];
    for (let i = 0; i < 4; i++) {
      started.push(getEvents(t, auth, 'wait=2').then((response) => answered.push(i) && response));
      await until(() => t.events.hub.size === 2 + i);
    }
    expect(answered).toEqual([]);

    const fifth = getEvents(t, auth, 'wait=2');
    // The oldest is answered now, with no events; the other installation's poll is untouched.
    const oldest = (await started[0]) as Awaited<ReturnType<typeof getEvents>>;
    expect(oldest.statusCode).toBe(200);
    expect(oldest.json()).toMatchObject({ events: [] });
    expect(answered).toEqual([0]);
    expect(t.events.hub.size).toBe(5);

    await Promise.all([fifth, otherPoll, ...started]);
  });
});

describe('a wake-up', () => {
  it('reads the queue once for an installation’s waiting polls, not once per poll', async () => {
    const { auth, installationId } = await register(t.app);
    const trigger = await insertTrigger(t.database, installationId);
    const waiting = Array.from({ length: 4 }, () => getEvents(t, auth, 'wait=10'));
    await until(() => t.events.hub.size === 4);
    await new Promise((resolve) => setTimeout(resolve, 50));
    const before = queueReads();

    const id = await sendAccepted(t, trigger, { n: 1 });
    const answers = await Promise.all(waiting);
    for (const answer of answers) expect(answer.json().events.map((e: { id: string }) => e.id)).toEqual([id]);
    expect(queueReads() - before).toBe(1);
  });
});

describe('event requests per installation', () => {
  it('answers 429 past EVENT_REQUESTS_PER_MINUTE, for that installation only', async () => {
    const limited = await buildEventsApp({ EVENT_REQUESTS_PER_MINUTE: '3', REGISTRATIONS_PER_MINUTE: '1000' });
    try {
      const x = await register(limited.app);
      const y = await register(limited.app);
      const get = (who: { auth: { authorization: string } }) => getEvents(limited, who.auth);
      for (let i = 0; i < 3; i++) expect((await get(x)).statusCode).toBe(200);
      const refused = await get(x);
      expect(refused.statusCode).toBe(429);
      expect(refused.json()).toMatchObject({ code: 'rate_limited' });
      expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
      expect((await get(y)).statusCode).toBe(200);
    } finally {
      await limited.close();
    }
  });
});
