import type { triggerDailyUsage, triggers } from '../db/schema.js';

/** A trigger as every route answers it. */

export type TriggerRow = typeof triggers.$inferSelect;
export type TriggerUsageRow = Pick<typeof triggerDailyUsage.$inferSelect, 'kept' | 'skipped' | 'skippedReason'>;

type TriggerStatus = 'active' | 'paused' | 'needs_reconnect' | 'disabled_by_composio';

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
  /** With `disabled_by_composio` only: Composio's reason (`subscription_auth_failure`, …). */
  readonly statusReason?: string;
  /** Events of the current UTC day: kept in the queue, and skipped with the last reason. */
  readonly today: { readonly kept: number; readonly skipped: number; readonly skippedReason: string | null };
  readonly createdAt: string;
}

/**
 * An expired account outranks everything: nothing brings events back until it reconnects. A stop
 * by Composio outranks a pause, so a trigger Composio stopped never reads as merely paused or,
 * worse, as `active` while no event will come.
 */
function triggerStatus(row: Pick<TriggerRow, 'enabled' | 'needsReconnectAt' | 'composioDisabledAt'>): TriggerStatus {
  if (row.needsReconnectAt !== null) return 'needs_reconnect';
  if (row.composioDisabledAt !== null) return 'disabled_by_composio';
  return row.enabled ? 'active' : 'paused';
}

export function toTriggerView(row: TriggerRow, usage: TriggerUsageRow | null | undefined): TriggerView {
  const status = triggerStatus(row);
  return {
    id: row.id,
    automationId: row.automationId,
    toolkit: row.toolkit,
    triggerSlug: row.triggerSlug,
    connectedAccountId: row.connectedAccountId,
    filter: row.filter as Record<string, string>,
    config: row.config as Record<string, unknown>,
    enabled: row.enabled,
    status,
    ...(status === 'disabled_by_composio' ? { statusReason: row.composioDisabledReason ?? 'unknown' } : {}),
    today: { kept: usage?.kept ?? 0, skipped: usage?.skipped ?? 0, skippedReason: usage?.skippedReason ?? null },
    createdAt: row.createdAt.toISOString(),
  };
}
