import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openBoundedPool } from '../../src/db/bounded-pool.js';
import { driverFault } from '../../src/db/driver-faults.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { until } from '../support/http.js';

/**
 * postgres.js reads Postgres's array types once per connection, as it opens, and never again if
 * that read fails (the database or a pooler going away at that moment, a statement timeout), nor
 * does it handle the failure (src/db/driver-faults.ts). A lane of the pool whose connection lost
 * that read still writes arrays right: the lanes share what any of them read.
 */

let database: TestDatabase;
beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(() => database.drop());

describe('a pool lane whose connection could not read the array types', () => {
  it('still writes arrays as Postgres reads them, and the driver’s unhandled failure is the one the broker lets pass', async () => {
    // The run's own handler would take the driver's unhandled rejection for a failure of this test.
    const theirs = process.listeners('unhandledRejection');
    process.removeAllListeners('unhandledRejection');
    const rejected: unknown[] = [];
    process.on('unhandledRejection', (reason) => rejected.push(reason));
    const pool = openBoundedPool(database.url, {
      size: 2,
      timeoutMs: 3_000,
      client: { onnotice: () => {}, connection: { statement_timeout: 500 } },
    });
    const unnest = () => pool.sql<{ x: string }[]>`select x from unnest(${['a', 'b']}::text[]) as t(x)`;
    try {
      expect((await unnest()).map((row) => row.x)).toEqual(['a', 'b']);
      // The second lane opens while the catalog is locked: its read of the types waits past the
      // statement timeout and fails.
      let locked = () => {};
      const isLocked = new Promise<void>((resolve) => (locked = resolve));
      const locking = database.sql.begin(async (tx) => {
        await tx`lock table pg_catalog.pg_type in access exclusive mode`;
        locked();
        await sleep(1_500);
      });
      await isLocked;
      await Promise.allSettled([pool.sql`select pg_sleep(1)`, unnest()]);
      await locking;
      // Reported once nothing has handled it, a moment after it failed.
      await until(() => rejected.length > 0, 5_000, 'the driver’s unhandled rejection');
      expect(rejected.map(driverFault)).toEqual([expect.stringMatching(/array types/)]);

      const answers = await Promise.all(Array.from({ length: 6 }, unnest));
      for (const rows of answers) expect(rows.map((row) => row.x)).toEqual(['a', 'b']);
      // And reads them as arrays, on whichever lane.
      const read = await Promise.all(Array.from({ length: 6 }, () => pool.sql<{ xs: string[] }[]>`select array['a', 'b'] as xs`));
      for (const rows of read) expect(rows[0]!.xs).toEqual(['a', 'b']);
    } finally {
      await pool.end();
      process.removeAllListeners('unhandledRejection');
      for (const listener of theirs) process.on('unhandledRejection', listener);
    }
  });
});
