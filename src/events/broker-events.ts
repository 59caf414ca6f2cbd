import { randomUUID } from 'node:crypto';

/**
 * The ids of the events the broker makes itself, built here alone. They start with `omb:`, which
 * a webhook's `webhook-id` may not (src/events/intake/receive.ts), so no webhook can share one and
 * dedupe never takes one for the other.
 */
export const BROKER_EVENT_ID_PREFIX = 'omb:';

/** One `quota.exceeded` a day: the id is the day's, so a second one the same day is a duplicate. */
export function quotaExceededEventId(day: string): string {
  return `${BROKER_EVENT_ID_PREFIX}quota.exceeded:${day}`;
}

export function triggerTestEventId(): string {
  return `${BROKER_EVENT_ID_PREFIX}trigger.test:${randomUUID()}`;
}

/**
 * A trigger the reconciliation found disabled on Composio without the broker having heard of it:
 * one id per Composio trigger and stop (Composio's `updated_at` of it), so a later sweep finding
 * the same stop again is a duplicate.
 */
export function foundDisabledEventId(composioTriggerId: string, stoppedAt: string): string {
  return `${BROKER_EVENT_ID_PREFIX}trigger.disabled:${composioTriggerId}:${stoppedAt}`;
}
