import { getAccount, setAccountStatus } from './accounts.js';
import { findTriggerType } from './catalog.js';
import { SimCode, SimError } from './errors.js';
import { nanoId } from './ids.js';
import type { AccountRecord, SimStore, TriggerRecord } from './store.js';
import { getTrigger } from './triggers.js';
import { type DeliveryResult, deliver, subscriptionFor } from './webhooks.js';
import { accountWire } from './wire.js';

/** What happens at the provider, simulated: a trigger fires, an account's sign-in expires. */

export async function fireTrigger(store: SimStore, triggerId: string, data?: Record<string, unknown>): Promise<DeliveryResult> {
  const trigger = getTrigger(store, triggerId);
  if (trigger.disabledAt !== null)
    throw new SimError(409, SimCode.badRequest, `Trigger ${triggerId} is disabled; Composio would not deliver its events`);
  const account = getAccount(store, trigger.connectedAccountId);
  const subscription = subscriptionFor(store, 'composio.trigger.message');
  if (!subscription) throw new SimError(409, SimCode.badRequest, 'No webhook subscription receives composio.trigger.message');
  const payload = data ?? findTriggerType(trigger.slug)?.sample ?? {};
  const logId = nanoId('log');
  return deliver(
    subscription,
    (messageId, at) => triggerMessage(subscription.version, { messageId, at, logId, trigger, account, payload }),
    store.now(),
  );
}

/**
 * The account's sign-in is gone: EXPIRED, and (when subscribed) a signed
 * `composio.connected_account.expired` event whose `data` is the account as GET returns it.
 */
export async function expireAccount(
  store: SimStore,
  accountId: string,
): Promise<{ account: AccountRecord; delivery: DeliveryResult | null }> {
  const account = getAccount(store, accountId);
  setAccountStatus(store, account, 'EXPIRED', 'The refresh token was revoked or has expired');
  const subscription = subscriptionFor(store, 'composio.connected_account.expired');
  if (!subscription) return { account, delivery: null };
  const delivery = await deliver(
    subscription,
    (messageId, at) => ({
      id: messageId,
      timestamp: at.toISOString(),
      type: 'composio.connected_account.expired',
      metadata: { project_id: store.projectId, org_id: store.orgId },
      data: accountWire(store, account),
    }),
    store.now(),
  );
  return { account, delivery };
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
