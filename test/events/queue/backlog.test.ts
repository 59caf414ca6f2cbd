import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventRetention, events, installations } from '../../../src/db/schema.js';
import { queueBacklog } from '../../../src/events/queue/queue.js';
import { installationDetail } from '../../../src/operators/lookups.js';
import { serviceStats } from '../../../src/operators/stats.js';
import { createTestDatabase, type TestDatabase } from '../../support/database.js';

/**
 * The queue's backlog as operators and scrapers read it: one installation's (the lookup), every
 * installation's (`/v1/admin/stats`, `/metrics`). Both leave out events past the retention
 * horizon, which polls no longer serve.
 */

const HOUR_MS = 3_600_000;
const now = new Date();
const ago = (ms: number) => new Date(now.getTime() - ms);

let database: TestDatabase;
beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(() => database.drop());

/** An installation whose queue holds events received at `receivedAt`, the first `acknowledged` of them read. */
async function installationWithQueue(receivedAt: Date[], acknowledged = 0): Promise<string> {
  const id = randomUUID();
  await database.db.insert(installations).values({
    id,
    tokenHash: `hash-${id}`,
    composioUserId: `omb_${id.replaceAll('-', '')}`,
    lastEventPosition: receivedAt.length,
    ackedEventPosition: acknowledged,
  });
  if (receivedAt.length > 0) {
    await database.db.insert(events).values(
      receivedAt.map((at, i) => ({
        installationId: id,
        position: i + 1,
        id: `e-${id}-${i + 1}`,
        type: 'trigger.event',
        receivedAt: at,
        data: {},
      })),
    );
  }
  return id;
}

const lookupQueue = async (id: string) => (await installationDetail(database.db, id, now)).queue;
const statsQueue = async () => (await serviceStats(database.db, now, 'open')).queue;

describe('the queue backlog', () => {
  it('leaves out, for one installation as for all, events received before the retention horizon', async () => {
    await database.db.insert(eventRetention).values({ keptSince: ago(48 * HOUR_MS) });
    const expired = await installationWithQueue([ago(72 * HOUR_MS), ago(HOUR_MS), now]);
    const onlyExpired = await installationWithQueue([ago(96 * HOUR_MS)]);
    const drained = await installationWithQueue([ago(2 * HOUR_MS)], 1);

    const kept = { depth: 2, oldestUnacknowledgedAt: ago(HOUR_MS).toISOString(), oldestUnacknowledgedAgeSeconds: 3600 };
    expect(await lookupQueue(expired)).toEqual(kept);
    expect(await lookupQueue(onlyExpired)).toEqual({ depth: 0, oldestUnacknowledgedAt: null, oldestUnacknowledgedAgeSeconds: null });
    expect(await lookupQueue(drained)).toEqual({ depth: 0, oldestUnacknowledgedAt: null, oldestUnacknowledgedAgeSeconds: null });
    // The service's figures are the same reading over every installation: here only `expired` has a kept backlog.
    expect(await statsQueue()).toEqual(kept);
    expect(await queueBacklog(database.sql)).toEqual({ depth: 2, oldestUnacknowledgedAt: ago(HOUR_MS) });
  });

  it('adds up every installation’s backlog into the service’s, each lookup counting its own', async () => {
    const before = await queueBacklog(database.sql);
    const first = await installationWithQueue([ago(3 * HOUR_MS), ago(HOUR_MS)]);
    const second = await installationWithQueue([ago(5 * HOUR_MS), ago(4 * HOUR_MS), now], 1);

    expect(await lookupQueue(first)).toMatchObject({ depth: 2, oldestUnacknowledgedAgeSeconds: 3 * 3600 });
    expect(await lookupQueue(second)).toMatchObject({ depth: 2, oldestUnacknowledgedAgeSeconds: 4 * 3600 });
    expect(await statsQueue()).toEqual({
      depth: before.depth + 4,
      oldestUnacknowledgedAt: ago(4 * HOUR_MS).toISOString(),
      oldestUnacknowledgedAgeSeconds: 4 * 3600,
    });
  });
});
