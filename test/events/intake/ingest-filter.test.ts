import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type IngestDeps, ingestWebhookEvent } from '../../../src/events/intake/ingest.js';
import { IngestBatcher, type TriggerMessageInput } from '../../../src/events/intake/ingest-batcher.js';
import { createLogger } from '../../../src/logger.js';
import { createTestDatabase, type TestDatabase } from '../../support/database.js';
import { countEvents, installationWithTrigger, parsedTriggerMessage, payloadJsonOf, type TestTrigger } from '../helpers.js';

/**
 * A trigger's filter is decided once, in the database, inside the write that keeps or refuses the
 * message: every trigger message costs one write, filtered or not, Gmail or not.
 */
let database: TestDatabase;
beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(() => database.drop());

/** Ingest whose batcher counts the writes it is asked for. */
function countingIngest() {
  const batcher = new IngestBatcher(database.sql, createLogger('silent'));
  const writes: TriggerMessageInput[] = [];
  const deps: IngestDeps = {
    database,
    quotas: { standard: 100, paid: 100 },
    batcher: Object.assign(Object.create(batcher), {
      write: (input: TriggerMessageInput) => {
        writes.push(input);
        return batcher.write(input);
      },
    }),
    notifier: { queued: () => {} },
  };
  return { deps, writes };
}

async function ingest(deps: IngestDeps, trigger: TestTrigger, data: Record<string, unknown>) {
  const event = parsedTriggerMessage(trigger, data);
  return ingestWebhookEvent(deps, { eventId: `msg_${randomUUID()}`, event, payloadJson: payloadJsonOf(event), receivedAt: new Date() });
}

describe('a filtered trigger', () => {
  it('on Gmail keeps what arrives in one write: Gmail applied the filter as its search', async () => {
    const gmail = await installationWithTrigger(database, {
      toolkit: 'gmail',
      triggerSlug: 'GMAIL_NEW_GMAIL_MESSAGE',
      filter: { from: 'boss@example.com' },
    });
    const { deps, writes } = countingIngest();
    const result = await ingest(deps, gmail, { sender: 'someone@else.org' });
    expect(result.outcome).toBe('accepted');
    expect(writes).toHaveLength(1);
    expect(await countEvents(database, gmail.installationId)).toBe(1);
  });

  it('on another app keeps a match and refuses the rest, each in one write', async () => {
    const github = await installationWithTrigger(database, { filter: { 'issue.title': 'crash' } });
    const { deps, writes } = countingIngest();
    expect((await ingest(deps, github, { issue: { title: 'A CRASH on start' } })).outcome).toBe('accepted');
    expect((await ingest(deps, github, { issue: { title: 'a feature' } })).outcome).toBe('filtered');
    expect(writes).toHaveLength(2);
    expect(await countEvents(database, github.installationId)).toBe(1);
  });

  it('in a batch, refuses its message and keeps the installation’s others in order', async () => {
    const github = await installationWithTrigger(database, { filter: { action: 'opened' } });
    const { deps } = countingIngest();
    const results = await Promise.all(
      ['opened', 'closed', 'opened', 'edited', 'opened'].map((action, n) => ingest(deps, github, { action, n })),
    );
    expect(results.map((r) => r.outcome)).toEqual(['accepted', 'filtered', 'accepted', 'filtered', 'accepted']);
    const kept = await database.sql<{ n: number }[]>`
      select (data->>'n')::int as n from events where installation_id = ${github.installationId} order by position`;
    expect(kept.map((row) => row.n)).toEqual([0, 2, 4]);
    const [usage] = await database.sql<{ kept: number }[]>`
      select kept from daily_usage where installation_id = ${github.installationId}`;
    expect(usage!.kept).toBe(3);
  });
});
