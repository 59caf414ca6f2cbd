import type { Db } from '../db/database.js';
import { AppError } from '../errors.js';
import { triggerTestEventId } from '../events/broker-events.js';
import { jsonForPostgres } from '../events/intake/ingest.js';
import { announcingQueued, type EventNotifier } from '../events/queue/notifier.js';
import { quotaDay } from '../plans/plan.js';
import { triggerNotFound } from './errors.js';
import { findTrigger } from './store.js';
import { samplePayload, type TriggerTypeCache } from './types.js';

export interface TriggerTestDeps {
  readonly db: Db;
  /** Where the sample comes from: only a type this process already holds, never a Composio call. */
  readonly types: Pick<TriggerTypeCache, 'peek'>;
  /** Told of the event queued, once committed: wakes the installation's polls here and counts it. */
  readonly notifier: Pick<EventNotifier, 'queued'>;
  /** `trigger.test` events each installation may queue per UTC day (`TRIGGER_TESTS_PER_DAY`). */
  readonly testsPerDay: number;
}

export interface TriggerTestResult {
  readonly eventId: string;
  /** Test events this installation may still queue today. */
  readonly remainingToday: number;
}

/**
 * Queues one `trigger.test` event for the installation's trigger: shaped like its `trigger.event`,
 * with a sample payload as data, outside the quota and within its own daily allowance
 * (migrations/functions/omb_queue_trigger_test.sql). Composio is not asked anything.
 */
export async function queueTriggerTest(
  deps: TriggerTestDeps,
  installationId: string,
  triggerId: string,
  now: Date,
): Promise<TriggerTestResult> {
  const trigger = await findTrigger(deps.db, installationId, triggerId);
  if (!trigger) throw triggerNotFound();
  const type = deps.types.peek(trigger.toolkit, trigger.triggerSlug);
  const data = type ? samplePayload(type.payloadSchema) : {};
  const eventId = triggerTestEventId();
  const { day, resetsAt } = quotaDay(now);
  // The function answers no installation: the one it was given is joined in, to be announced.
  const queueTest = announcingQueued(deps.db.$client, "select installation from called where outcome = 'queued'");
  const [row] = await queueTest<{ outcome: 'queued' | 'unknown_trigger' | 'over_allowance'; used: number | null }[]>`omb_queue_trigger_test(
      ${installationId}::uuid, ${trigger.id}::uuid, ${eventId}::text, ${jsonForPostgres(data)}::jsonb,
      ${now.toISOString()}::timestamptz, ${day}::date, ${deps.testsPerDay}::integer)
    cross join (select ${installationId}::uuid as installation) caller`;
  if (!row) throw new Error('omb_queue_trigger_test returned no row');
  if (row.outcome === 'unknown_trigger') throw triggerNotFound();
  if (row.outcome === 'over_allowance') {
    throw new AppError(
      429,
      'test_allowance_exceeded',
      `this installation has sent its ${deps.testsPerDay} test events for today; more after ${resetsAt.toISOString()}`,
      { 'retry-after': String(Math.max(1, Math.ceil((resetsAt.getTime() - now.getTime()) / 1000))) },
    );
  }
  deps.notifier.queued(installationId, 'trigger.test');
  return { eventId, remainingToday: Math.max(0, deps.testsPerDay - (row.used ?? deps.testsPerDay)) };
}
