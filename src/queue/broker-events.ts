import { randomUUID } from 'node:crypto';
import { nextUtcMidnight, utcDay } from '../clock.js';

/**
 * The ids of the events the broker makes itself, built here alone. They start with `omb:`, which
 * a webhook's `webhook-id` may not (src/intake/receive.ts), so no webhook can share one and
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

/** The UTC day something at `at` counts in, and when that day's quota and allowances reset. */
export function quotaDay(at: Date): { day: string; resetsAt: Date } {
  return { day: utcDay(at), resetsAt: nextUtcMidnight(at) };
}
