import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Database, openDatabase } from '../../src/db/database.js';
import { checkSessionKept } from '../../src/db/session-check.js';
import { createLogger } from '../../src/logger.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

/**
 * With `DATABASE_DIRECT_URL` (`directUrl`), the pool's URL may be a transaction pooler: nothing the
 * pool sends may rest on its session. It sends no `statement_timeout` (PgBouncer refuses it as a
 * startup parameter), so it bounds each statement itself, transactions' included. Here both URLs
 * are Postgres itself; the tests through PgBouncer are test/pooler/*.system.test.ts.
 */

const TIMEOUT_MS = 600;

let real: TestDatabase;
let pooled: Database;
beforeAll(async () => {
  real = await createTestDatabase();
  pooled = openDatabase({ url: real.url, directUrl: real.url, poolSize: 2, logger: createLogger('silent'), timeoutMs: TIMEOUT_MS });
});
afterAll(async () => {
  await pooled?.close();
  await real?.drop();
});

describe('a pool whose URL may be a transaction pooler', () => {
  it('sends no statement_timeout, yet a statement of a transaction is stopped at the bound', async () => {
    expect((await pooled.sql`show statement_timeout`)[0]).toEqual({ statement_timeout: '0' });
    const startedAt = performance.now();
    const slow = pooled.db.transaction(async (tx) => {
      await tx.execute(sql`select 1`);
      await tx.execute(sql`select pg_sleep(5)`);
    });
    await expect(slow).rejects.toMatchObject({ cause: { code: '57014' } });
    expect(performance.now() - startedAt).toBeLessThan(TIMEOUT_MS + 1_500);
    // Cancelled in Postgres too: nothing of it still runs.
    const running = await real.sql`select count(*)::int as n from pg_stat_activity where query = 'select pg_sleep(5)' and state = 'active'`;
    expect(running[0]!.n).toBe(0);
  });

  it('stops a statement of a reserved connection at the bound', async () => {
    const reserved = await pooled.sql.reserve();
    try {
      await expect(reserved`select pg_sleep(5)`).rejects.toMatchObject({ code: '57014' });
    } finally {
      reserved.release();
    }
  });

  it('keeps the session things on the direct URL, bounded by Postgres there', async () => {
    expect(pooled.sessionUrl).toBe(real.url);
    const reserved = await pooled.sessions.reserve();
    try {
      expect((await reserved`show statement_timeout`)[0]).toEqual({ statement_timeout: `${TIMEOUT_MS}ms` });
    } finally {
      reserved.release();
    }
  });

  it('takes Postgres itself for a URL that keeps its session', async () => {
    await expect(checkSessionKept(real.url, 'DATABASE_DIRECT_URL', { heardWithinMs: 5_000 })).resolves.toBeUndefined();
  });
});
