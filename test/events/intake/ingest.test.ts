import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { WebhookEvent } from '../../../src/composio/webhook-events.js';
import type { QueuedEventType } from '../../../src/events/event.js';
import { type IngestDeps, ingestWebhookEvent } from '../../../src/events/intake/ingest.js';
import { IngestBatcher } from '../../../src/events/intake/ingest-batcher.js';
import { createLogger } from '../../../src/logger.js';
import { createTestDatabase, type TestDatabase } from '../../support/database.js';
import { installationWithTrigger, parsedTriggerMessage, payloadJsonOf, type TestTrigger } from '../helpers.js';

let database: TestDatabase;
beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(() => database.drop());

/** Ingest with a notifier and a metrics hook that remember what they were told. */
function recordingIngest() {
  const woken: string[] = [];
  const queued: QueuedEventType[] = [];
  const deps: IngestDeps = {
    database,
    quotas: { standard: 1, paid: 2 },
    batcher: new IngestBatcher(database.sql, createLogger('silent')),
    notifier: {
      queued: (installationId, type) => {
        woken.push(installationId);
        queued.push(type);
      },
    },
  };
  return { deps, woken, queued };
}

const message = (trigger: TestTrigger) => parsedTriggerMessage(trigger);

const receivedAt = new Date('2031-03-14T12:00:00Z');

describe('ingestWebhookEvent', () => {
  it('answers the type of what it queued and wakes the installation itself, only when something was queued', async () => {
    const trigger = await installationWithTrigger(database);
    const { deps, woken, queued } = recordingIngest();
    const ingest = (event: WebhookEvent, eventId: string = randomUUID()) =>
      ingestWebhookEvent(deps, { eventId, event, payloadJson: payloadJsonOf(event), receivedAt });

    const first = await ingest(message(trigger), 'evt-first');
    expect(first).toEqual({ outcome: 'accepted', installationId: trigger.installationId, queued: 'trigger.event' });
    // Over the standard quota of one: the installation is told once, then nothing more is queued.
    expect(await ingest(message(trigger))).toMatchObject({ outcome: 'over_quota', queued: 'quota.exceeded' });
    expect(await ingest(message(trigger))).toMatchObject({ outcome: 'over_quota', queued: null });
    expect(await ingest(message(trigger), 'evt-first')).toMatchObject({ outcome: 'duplicate', queued: null });
    const expired = await ingest({
      type: 'composio.connected_account.expired',
      id: `msg_${randomUUID()}`,
      timestamp: receivedAt.toISOString(),
      connectedAccountId: trigger.connectedAccountId,
      userId: trigger.composioUserId,
      toolkit: 'github',
    });
    expect(expired).toEqual({ outcome: 'accepted', installationId: trigger.installationId, queued: 'connection.expired' });

    expect(queued).toEqual(['trigger.event', 'quota.exceeded', 'connection.expired']);
    expect(woken).toEqual([trigger.installationId, trigger.installationId, trigger.installationId]);
  });

  it('applies the paid plan’s limit in the same write, from the grant the installation holds', async () => {
    const trigger = await installationWithTrigger(database);
    await database.sql`
      insert into grants (jti, subject, plan, holder_installation_id, issued_at, expires_at)
      values (${randomUUID()}, 'cloud', 'paid', ${trigger.installationId}, ${receivedAt.toISOString()}::timestamptz,
              ${new Date(receivedAt.getTime() + 86_400_000).toISOString()}::timestamptz)`;
    const { deps } = recordingIngest();
    const ingest = () => {
      const event = message(trigger);
      return ingestWebhookEvent(deps, { eventId: randomUUID(), event, payloadJson: payloadJsonOf(event), receivedAt });
    };
    expect(await ingest()).toMatchObject({ outcome: 'accepted' });
    expect(await ingest()).toMatchObject({ outcome: 'accepted' });
    expect(await ingest()).toMatchObject({ outcome: 'over_quota', queued: 'quota.exceeded' });
    const [event] = await database.sql<{ data: { eventsPerDay: number } }[]>`
      select data from events where installation_id = ${trigger.installationId} and type = 'quota.exceeded'`;
    expect(event?.data.eventsPerDay).toBe(2);
  });
});
