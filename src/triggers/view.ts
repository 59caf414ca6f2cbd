import type { triggerDailyUsage, triggers } from '../db/schema.js';

/** A trigger as every route answers it. */

export type TriggerRow = typeof triggers.$inferSelect;
export type TriggerUsageRow = Pick<typeof triggerDailyUsage.$inferSelect, 'kept' | 'skipped' | 'skippedReason'>;

export type TriggerStatus = 'active' | 'paused' | 'needs_reconnect';

export interface TriggerView {
  readonly id: string;
  readonly automationId: string;
  readonly toolkit: string;
  readonly triggerSlug: string;
  readonly connectedAccountId: string;
  readonly filter: Record<string, string>;
  readonly config: Record<string, unknown>;
  readonly enabled: boolean;
  readonly status: TriggerStatus;
  /** Events of the current UTC day: kept in the queue, and skipped with the last reason. */
  readonly today: { readonly kept: number; readonly skipped: number; readonly skippedReason: string | null };
  readonly createdAt: string;
}

/** An expired account outranks a pause: resuming would not bring events back until it reconnects. */
export function triggerStatus(row: Pick<TriggerRow, 'enabled' | 'needsReconnectAt'>): TriggerStatus {
  if (row.needsReconnectAt !== null) return 'needs_reconnect';
  return row.enabled ? 'active' : 'paused';
}

export function toTriggerView(row: TriggerRow, usage: TriggerUsageRow | null | undefined): TriggerView {
  return {
    id: row.id,
    automationId: row.automationId,
    toolkit: row.toolkit,
    triggerSlug: row.triggerSlug,
    connectedAccountId: row.connectedAccountId,
    filter: row.filter as Record<string, string>,
    config: row.config as Record<string, unknown>,
    enabled: row.enabled,
    status: triggerStatus(row),
    today: { kept: usage?.kept ?? 0, skipped: usage?.skipped ?? 0, skippedReason: usage?.skippedReason ?? null },
    createdAt: row.createdAt.toISOString(),
  };
}
