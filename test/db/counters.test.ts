import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sharedCounters } from '../../src/db/counters.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

let database: TestDatabase;
beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(() => database.drop());

describe('the shared request counters', () => {
  it('count hits in one window and say how long it has left', async () => {
    const counters = sharedCounters(database.sql);
    expect(await counters.hit('k:count', 60_000)).toEqual({ current: 1, ttl: 60_000 });
    const second = await counters.hit('k:count', 60_000);
    expect(second.current).toBe(2);
    expect(second.ttl).toBeLessThanOrEqual(60_000);
    expect((await counters.read('k:count')).current).toBe(2);
  });

  it('never answer a wait longer than the window, though a concurrent first hit set its end from a later instant', async () => {
    // Two first hits at once: the one whose transaction began first waits on the other's row,
    // whose window ends at that later transaction's now() plus the window.
    await database.sql`
      insert into rate_limit_counters (key, hits, resets_at) values ('k:race', 1, now() + interval '60.8 seconds')`;
    const hit = await sharedCounters(database.sql).hit('k:race', 60_000);
    expect(hit).toEqual({ current: 2, ttl: 60_000 });
  });
});
