import { getAccount, setAccountStatus } from './accounts.js';
import { findTriggerType } from './catalog.js';
import { SimCode, SimError } from './errors.js';
import { gmailQueryMatches } from './gmail-search.js';
import { nanoId } from './ids.js';
import type { AccountRecord, SimStore, TriggerRecord } from './store.js';
import { type ComposioDisableReason, disableByComposio, getTrigger, reviveReconnectedTriggers } from './triggers.js';
import { type DeliveryResult, deliver, subscriptionFor } from './webhooks.js';
import { accountWire } from './wire.js';

/** What happens at the provider, simulated: a trigger fires, an account's sign-in expires. */

export async function fireTrigger(store: SimStore, triggerId: string, data?: Record<string, unknown>): Promise<DeliveryResult> {
  reviveReconnectedTriggers(store);
  const trigger = getTrigger(store, triggerId);
  if (trigger.disabledAt !== null)
    throw new SimError(409, SimCode.badRequest, `Trigger ${triggerId} is disabled; Composio would not deliver its events`);
  const account = getAccount(store, trigger.connectedAccountId);
  const subscription = subscriptionFor(store, 'composio.trigger.message');
  if (!subscription) throw new SimError(409, SimCode.badRequest, 'No webhook subscription receives composio.trigger.message');
  const payload = data ?? findTriggerType(trigger.slug)?.sample ?? {};
  // Gmail itself leaves out the mail the trigger's search excludes: nothing reaches Composio.
  const query = findTriggerType(trigger.slug)?.toolkit === 'gmail' ? trigger.config.query : undefined;
  if (typeof query === 'string' && query.trim() !== '' && !gmailQueryMatches(query, payload)) {
    return {
      webhookId: '',
      url: subscription.webhookUrl,
      status: null,
      ok: false,
      excludedByQuery: query,
      error: "the trigger's Gmail query excludes this mail",
    };
  }
  const logId = nanoId('log');
  return deliver(store, subscription, (messageId, at) =>
    triggerMessage(subscription.version, { messageId, at, logId, trigger, account, payload }),
  );
}

/**
 * The account's sign-in is gone: EXPIRED, and (when subscribed) a signed
 * `composio.connected_account.expired` event whose `data` is the account as GET returns it. Its
 * running triggers stop too, each announced as `composio.trigger.disabled` with
 * `connection_expired` (when subscribed); they run again once the account is ACTIVE.
 */
export async function expireAccount(
  store: SimStore,
  accountId: string,
): Promise<{ account: AccountRecord; delivery: DeliveryResult | null; triggersDisabled: DisabledTrigger[] }> {
  const account = getAccount(store, accountId);
  setAccountStatus(store, account, 'EXPIRED', 'The refresh token was revoked or has expired');
  const subscription = subscriptionFor(store, 'composio.connected_account.expired');
  const delivery = subscription
    ? await deliver(store, subscription, (messageId, at) => ({
        id: messageId,
        timestamp: at.toISOString(),
        type: 'composio.connected_account.expired',
        metadata: { project_id: store.projectId, org_id: store.orgId },
        data: accountWire(store, account),
      }))
    : null;
  const triggersDisabled: DisabledTrigger[] = [];
  for (const trigger of [...store.triggers.values()].sort((a, b) => a.seq - b.seq)) {
    if (trigger.connectedAccountId !== account.id || !disableByComposio(store, trigger, 'connection_expired')) continue;
    triggersDisabled.push({ triggerId: trigger.id, delivery: await announceDisabled(store, trigger, 'connection_expired') });
  }
  return { account, delivery, triggersDisabled };
}

export interface DisabledTrigger {
  readonly triggerId: string;
  /** Null when no subscription asked for `composio.trigger.disabled`. */
  readonly delivery: DeliveryResult | null;
}

/**
 * Composio stops a running trigger by itself (an auth or subscription failure, polling that keeps
 * failing): disabled, and a signed `composio.trigger.disabled` when the subscription asked for
 * it. Refused (409) for a trigger that is not running: Composio does not stop one twice.
 */
export async function disableTriggerByComposio(store: SimStore, triggerId: string, reason: string): Promise<DisabledTrigger> {
  reviveReconnectedTriggers(store);
  const trigger = getTrigger(store, triggerId);
  if (!disableByComposio(store, trigger, reason as ComposioDisableReason)) {
    throw new SimError(409, SimCode.triggerInstanceConflict, `Trigger instance ${triggerId} is already disabled`);
  }
  return { triggerId, delivery: await announceDisabled(store, trigger, reason) };
}

/**
 * `composio.trigger.disabled` (V3 only; sent only when the subscription asked for it). Composio
 * documents `data.disabled_reason`; the rest is the trigger as the active-triggers list names it.
 */
async function announceDisabled(store: SimStore, trigger: TriggerRecord, reason: string): Promise<DeliveryResult | null> {
  const subscription = subscriptionFor(store, 'composio.trigger.disabled');
  if (subscription?.version !== 'V3') return null;
  return deliver(store, subscription, (messageId, at) => ({
    id: messageId,
    timestamp: at.toISOString(),
    type: 'composio.trigger.disabled',
    metadata: { project_id: store.projectId, org_id: store.orgId },
    data: {
      trigger_id: trigger.id,
      trigger_slug: trigger.slug,
      connected_account_id: trigger.connectedAccountId,
      disabled_reason: reason,
      disabled_at: trigger.disabledAt,
    },
  }));
}

interface MessageParts {
  messageId: string;
  at: Date;
  logId: string;
  trigger: TriggerRecord;
  account: AccountRecord;
  payload: Record<string, unknown>;
}

/** `composio.trigger.message` in the subscription's payload version (composio-api.md §6.2). */
function triggerMessage(version: 'V1' | 'V2' | 'V3', p: MessageParts): unknown {
  if (version === 'V3') {
    return {
      id: p.messageId,
      timestamp: p.at.toISOString(),
      type: 'composio.trigger.message',
      metadata: {
        log_id: p.logId,
        trigger_slug: p.trigger.slug,
        trigger_id: p.trigger.id,
        connected_account_id: p.account.id,
        auth_config_id: p.account.authConfigId,
        user_id: p.account.userId,
      },
      data: p.payload,
    };
  }
  if (version === 'V2') {
    return {
      type: p.trigger.slug.toLowerCase(),
      timestamp: p.at.toISOString(),
      log_id: p.logId,
      data: {
        ...p.payload,
        connection_id: p.account.uuid,
        connection_nano_id: p.account.id,
        trigger_nano_id: p.trigger.id,
        trigger_id: p.trigger.uuid,
        user_id: p.account.userId,
      },
    };
  }
  return { trigger_name: p.trigger.slug, connection_id: p.account.uuid, trigger_id: p.trigger.uuid, payload: p.payload, log_id: p.logId };
}
