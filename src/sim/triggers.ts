import { isDeepStrictEqual } from 'node:util';
import { getAccount } from './accounts.js';
import { findTriggerType, type TriggerTypeDef } from './catalog.js';
import { badRequest, SimCode, SimError } from './errors.js';
import { nanoId, uuid } from './ids.js';
import { asObject, type Json, optionalString } from './input.js';
import type { AccountRecord, SimStore, TriggerRecord } from './store.js';

/** Trigger types and trigger instances. */

/** The trigger-types endpoint answers an unknown slug with 400, not 404 (the SDK relies on it). */
export function requireTriggerType(slug: string): TriggerTypeDef {
  const type = findTriggerType(slug);
  if (!type) throw new SimError(400, SimCode.triggerTypeNotFound, `Trigger type ${slug.toUpperCase()} not found`);
  return type;
}

export function getTrigger(store: SimStore, id: string): TriggerRecord {
  const trigger = store.triggers.get(id);
  if (!trigger) throw new SimError(404, SimCode.triggerInstanceNotFound, `Trigger instance ${id} not found`);
  return trigger;
}

/**
 * Composio: "Creates a new trigger instance or updates an existing one with the same
 * configuration … If a matching trigger already exists and is disabled, it will be
 * re-enabled." So the match is slug + account + configuration; another configuration is
 * another instance. 201 for a new instance, 200 for a match.
 */
export function upsertTrigger(store: SimStore, slug: string, rawBody: unknown): { trigger: TriggerRecord; created: boolean } {
  const type = requireTriggerType(slug);
  const body = asObject(rawBody);
  const account = resolveAccount(store, type, optionalString(body, 'connected_account_id'), optionalString(body, 'user_id'));
  const config = validateConfig(type, asObject(body.trigger_config ?? body.triggerConfig, 'trigger_config'));
  const now = store.nowIso();
  const existing = [...store.triggers.values()].find(
    (t) => t.slug === type.slug && t.connectedAccountId === account.id && isDeepStrictEqual(t.config, config),
  );
  if (existing) {
    existing.disabledAt = null;
    existing.disabledReason = null;
    existing.updatedAt = now;
    return { trigger: existing, created: false };
  }
  const trigger: TriggerRecord = {
    id: nanoId('ti'),
    uuid: uuid(),
    slug: type.slug,
    userId: account.userId,
    connectedAccountId: account.id,
    config,
    disabledAt: null,
    updatedAt: now,
    seq: store.nextSeq(),
  };
  store.triggers.set(trigger.id, trigger);
  store.issuedTriggerIds.add(trigger.id);
  return { trigger, created: true };
}

function resolveAccount(store: SimStore, type: TriggerTypeDef, accountId: string | undefined, userId: string | undefined): AccountRecord {
  let account: AccountRecord | undefined;
  if (accountId) {
    account = getAccount(store, accountId);
    if (userId && account.userId !== userId) throw badRequest(`Connected account ${accountId} does not belong to user ${userId}`);
  } else if (userId) {
    account = [...store.accounts.values()]
      .sort((a, b) => a.seq - b.seq)
      .find((a) => a.userId === userId && a.toolkit === type.toolkit && a.status === 'ACTIVE');
    if (!account) throw badRequest(`No active connected account found for user ${userId} and toolkit ${type.toolkit}`);
  } else {
    throw badRequest('connected_account_id or user_id is required');
  }
  if (account.toolkit !== type.toolkit) {
    throw badRequest(`Connected account ${account.id} is for toolkit ${account.toolkit}, not ${type.toolkit}`);
  }
  // Guess: setting a trigger up needs working credentials, so a signed-out account is refused.
  if (account.status !== 'ACTIVE') throw badRequest(`Connected account ${account.id} is not active (${account.status})`);
  return account;
}

/** Checks required fields and primitive types against the type's JSON Schema, filling defaults. */
function validateConfig(type: TriggerTypeDef, config: Json): Json {
  const schema = type.config as { properties?: Record<string, { type?: string; default?: unknown }>; required?: string[] };
  const properties = schema.properties ?? {};
  const result: Json = {};
  for (const [key, property] of Object.entries(properties)) {
    if (property.default !== undefined) result[key] = property.default;
  }
  for (const [key, value] of Object.entries(config)) {
    const expected = properties[key]?.type;
    if (expected === 'string' && typeof value !== 'string') throw badRequest(`trigger_config.${key} must be a string`);
    if ((expected === 'number' || expected === 'integer') && typeof value !== 'number') {
      throw badRequest(`trigger_config.${key} must be a number`);
    }
    result[key] = value;
  }
  for (const key of schema.required ?? []) {
    if (result[key] === undefined || result[key] === '') throw badRequest(`trigger_config.${key} is required`);
  }
  return result;
}

export interface TriggerFilter {
  userIds?: string[] | undefined;
  accountIds?: string[] | undefined;
  triggerIds?: string[] | undefined;
  triggerNames?: string[] | undefined;
  authConfigIds?: string[] | undefined;
  showDisabled?: boolean | undefined;
}

export function listActiveTriggers(store: SimStore, filter: TriggerFilter): TriggerRecord[] {
  reviveReconnectedTriggers(store);
  const names = filter.triggerNames?.map((n) => n.toUpperCase());
  return [...store.triggers.values()]
    .filter(
      (t) =>
        (filter.showDisabled || t.disabledAt === null) &&
        (!filter.userIds || filter.userIds.includes(t.userId)) &&
        (!filter.accountIds || filter.accountIds.includes(t.connectedAccountId)) &&
        (!filter.triggerIds || filter.triggerIds.includes(t.id)) &&
        (!names || names.includes(t.slug)) &&
        (!filter.authConfigIds || filter.authConfigIds.includes(store.accounts.get(t.connectedAccountId)?.authConfigId ?? '')),
    )
    .sort((a, b) => a.seq - b.seq);
}

/**
 * Composio answers 409 "Trigger instance already enabled/disabled" to a switch to the state the
 * trigger is in (composio-api.md §10 row 2). Enabling a trigger Composio disabled by itself is a
 * real change: it runs again, and the reason is forgotten.
 */
export function setTriggerStatus(store: SimStore, id: string, rawBody: unknown): void {
  reviveReconnectedTriggers(store);
  const trigger = getTrigger(store, id);
  const status = optionalString(asObject(rawBody), 'status');
  if (status !== 'enable' && status !== 'disable') throw badRequest('status must be "enable" or "disable"');
  const enabled = trigger.disabledAt === null;
  if (enabled === (status === 'enable')) {
    throw new SimError(409, SimCode.triggerInstanceConflict, `Trigger instance already ${enabled ? 'enabled' : 'disabled'}`);
  }
  trigger.disabledAt = status === 'enable' ? null : store.nowIso();
  trigger.disabledReason = null;
  trigger.updatedAt = store.nowIso();
}

/**
 * A trigger already deleted (here, or with its account) answers 409 "already deleted", or 410
 * "already gone" when the simulator is told to (composio-api.md §10 row 3); one never handed out
 * is 404.
 */
export function deleteTrigger(store: SimStore, id: string): void {
  if (!store.triggers.has(id) && store.issuedTriggerIds.has(id)) {
    const gone = store.readings.deletedTrigger === 410;
    throw new SimError(
      store.readings.deletedTrigger,
      gone ? SimCode.triggerInstanceGone : SimCode.triggerInstanceConflict,
      gone ? `Trigger instance ${id} is already gone` : `Trigger instance ${id} already deleted`,
    );
  }
  getTrigger(store, id);
  store.triggers.delete(id);
}

/** Why Composio disables a trigger by itself (composio-api.md §10 row 5). */
export const COMPOSIO_DISABLE_REASONS = [
  'connection_expired',
  'subscription_auth_failure',
  'subscription_refresh_failure',
  'polling_failure_in_composio_infra',
] as const;
export type ComposioDisableReason = (typeof COMPOSIO_DISABLE_REASONS)[number];

/**
 * Composio stops a running trigger by itself. Answers false when it was not running (disabled
 * already, by the project or by Composio): nothing changes, and nothing is announced.
 */
export function disableByComposio(store: SimStore, trigger: TriggerRecord, reason: ComposioDisableReason): boolean {
  if (!(COMPOSIO_DISABLE_REASONS as readonly string[]).includes(reason)) {
    throw badRequest(`reason must be one of ${COMPOSIO_DISABLE_REASONS.join(', ')}`);
  }
  if (trigger.disabledAt !== null) return false;
  trigger.disabledAt = store.nowIso();
  trigger.disabledReason = reason;
  trigger.updatedAt = store.nowIso();
  return true;
}

/**
 * "The trigger is auto-re-enabled when the account returns to ACTIVE" (Composio's docs on
 * `connection_expired`). Looked at whenever triggers are read or changed, so that however the
 * account came back, its triggers run again.
 */
export function reviveReconnectedTriggers(store: SimStore): void {
  for (const trigger of store.triggers.values()) {
    if (trigger.disabledReason !== 'connection_expired') continue;
    if (store.accounts.get(trigger.connectedAccountId)?.status !== 'ACTIVE') continue;
    trigger.disabledAt = null;
    trigger.disabledReason = null;
    trigger.updatedAt = store.nowIso();
  }
}
