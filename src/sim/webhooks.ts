import { setTimeout as sleep } from 'node:timers/promises';
import { signWebhook } from '../composio/webhook-signature.js';
import { badRequest, SimCode, SimError } from './errors.js';
import { nanoId, webhookSecret } from './ids.js';
import { asObject, optionalString, optionalStringArray } from './input.js';
import type { SimStore, SubscriptionRecord } from './store.js';

/** The project's webhook subscription, and signed deliveries to it. */

export const EVENT_TYPES = [
  { event_type: 'composio.trigger.message', description: 'A trigger produced an event.', supported_versions: ['V1', 'V2', 'V3'] },
  {
    event_type: 'composio.connected_account.expired',
    description: 'A connected account can no longer be used and needs to be reconnected.',
    supported_versions: ['V3'],
  },
  {
    event_type: 'composio.trigger.disabled',
    description: 'Composio disabled a trigger by itself (an expired connection, a failed subscription refresh, repeated polling failures).',
    supported_versions: ['V3'],
  },
] as const;

/**
 * Composio redelivers a webhook it got no 2xx for; its schedule is not documented. By default the
 * simulator follows the Standard Webhooks one (5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h), as
 * migrations/functions/omb_events_seen.sql assumes; tests give a short one.
 */
export const STANDARD_REDELIVERY_DELAYS_MS: readonly number[] = [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000];

const VERSIONS = ['V1', 'V2', 'V3'] as const;
const DELIVERY_TIMEOUT_MS = 10_000;

export function getSubscription(store: SimStore, id: string): SubscriptionRecord {
  const subscription = store.subscriptions.get(id);
  if (!subscription) throw new SimError(404, SimCode.webhookSubscriptionNotFound, `Webhook subscription ${id} not found`);
  return subscription;
}

/** One subscription per project (Composio's rule); a second create is refused — 409 is a guess. */
export function createSubscription(store: SimStore, rawBody: unknown): SubscriptionRecord {
  if (store.subscriptions.size > 0) {
    throw new SimError(
      409,
      SimCode.webhookSubscriptionExists,
      'A webhook subscription already exists for this project',
      'Update the existing subscription instead',
    );
  }
  const body = asObject(rawBody);
  const now = store.nowIso();
  const subscription: SubscriptionRecord = {
    id: nanoId('ws'),
    webhookUrl: webhookUrl(optionalString(body, 'webhook_url')),
    version: version(optionalString(body, 'version') ?? 'V3'),
    enabledEvents: events(optionalStringArray(body, 'enabled_events') ?? ['composio.trigger.message']),
    secret: webhookSecret(),
    createdAt: now,
    updatedAt: now,
  };
  store.subscriptions.set(subscription.id, subscription);
  return subscription;
}

export function updateSubscription(store: SimStore, id: string, rawBody: unknown): SubscriptionRecord {
  const subscription = getSubscription(store, id);
  const body = asObject(rawBody);
  const url = optionalString(body, 'webhook_url');
  const requestedVersion = optionalString(body, 'version');
  const enabled = optionalStringArray(body, 'enabled_events');
  if (url !== undefined) subscription.webhookUrl = webhookUrl(url);
  if (requestedVersion !== undefined) subscription.version = version(requestedVersion);
  if (enabled !== undefined) subscription.enabledEvents = events(enabled);
  subscription.updatedAt = store.nowIso();
  return subscription;
}

export function rotateSecret(store: SimStore, id: string): SubscriptionRecord {
  const subscription = getSubscription(store, id);
  subscription.secret = webhookSecret();
  subscription.updatedAt = store.nowIso();
  return subscription;
}

function webhookUrl(value: string | undefined): string {
  if (!value) throw badRequest('webhook_url is required');
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw badRequest('webhook_url must be a valid URL');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw badRequest('webhook_url must be an http(s) URL');
  return url.toString();
}

function version(value: string): SubscriptionRecord['version'] {
  const upper = value.toUpperCase();
  if (!(VERSIONS as readonly string[]).includes(upper)) throw badRequest('version must be one of V1, V2, V3');
  return upper as SubscriptionRecord['version'];
}

function events(values: string[]): string[] {
  const known: readonly string[] = EVENT_TYPES.map((e) => e.event_type);
  const unknown = values.find((v) => !known.includes(v));
  if (unknown) throw badRequest(`Unknown event type: ${unknown}`);
  if (values.length === 0) throw badRequest('enabled_events must not be empty');
  return [...new Set(values)];
}

export interface DeliveryResult {
  /** The `webhook-id` header sent (`msg_…`), the same on every attempt; `''` when nothing was sent. */
  readonly webhookId: string;
  readonly url: string;
  /** The receiver's HTTP status; null when it could not be reached (or nothing was sent). */
  readonly status: number | null;
  readonly ok: boolean;
  readonly error?: string;
  readonly responseBody?: string;
  /** Which attempt this was (`x-composio-delivery-attempt`); 1 for the first. */
  readonly attempt?: number;
  /** Set when the trigger's own Gmail query left the mail out: nothing was sent at all. */
  readonly excludedByQuery?: string;
}

/**
 * POSTs one event, signed exactly as Composio signs (`webhook-id`, `webhook-timestamp`,
 * `webhook-signature: v1,<b64>`, `x-composio-webhook-version`), and answers the first attempt.
 * Like Composio (at least once), an attempt not answered 2xx is tried again later with the same
 * `webhook-id` and body, a fresh timestamp and signature and `x-composio-delivery-attempt: 2, 3, …`
 * (composio-api.md §10 row 9), after each of `store.redeliveryDelaysMs`, to the subscription as it
 * is then; until one is answered 2xx, the subscription is gone, or the simulator closes.
 */
export async function deliver(
  store: SimStore,
  subscription: SubscriptionRecord,
  build: (messageId: string, timestamp: Date) => unknown,
): Promise<DeliveryResult> {
  const webhookId = nanoId('msg', 24);
  const body = JSON.stringify(build(webhookId, store.now()));
  const first = await attempt(subscription, webhookId, body, 1, store.now(), store.closing);
  if (!first.ok) void redeliver(store, subscription.id, webhookId, body);
  return first;
}

async function redeliver(store: SimStore, subscriptionId: string, webhookId: string, body: string): Promise<void> {
  const delays = store.redeliveryDelaysMs;
  for (const [index, delayMs] of delays.entries()) {
    try {
      await sleep(delayMs, undefined, { signal: store.closing });
    } catch {
      return;
    }
    const subscription = store.subscriptions.get(subscriptionId);
    if (!subscription) return;
    const result = await attempt(subscription, webhookId, body, index + 2, store.now(), store.closing);
    if (result.ok || store.closing.aborted) return;
  }
}

async function attempt(
  subscription: SubscriptionRecord,
  webhookId: string,
  body: string,
  n: number,
  now: Date,
  closing: AbortSignal,
): Promise<DeliveryResult> {
  const timestamp = Math.floor(now.getTime() / 1000);
  const url = subscription.webhookUrl;
  try {
    const response = await fetch(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'user-agent': 'Composio-Simulator/1.0',
        'webhook-id': webhookId,
        'webhook-timestamp': String(timestamp),
        'webhook-signature': signWebhook({ id: webhookId, timestamp, body, secret: subscription.secret }),
        'x-composio-webhook-version': subscription.version,
        'x-composio-delivery-attempt': String(n),
      },
      body,
      redirect: 'manual',
      signal: AbortSignal.any([AbortSignal.timeout(DELIVERY_TIMEOUT_MS), closing]),
    });
    const text = await response.text();
    return { webhookId, url, status: response.status, ok: response.ok, responseBody: text.slice(0, 2000), attempt: n };
  } catch (error) {
    return { webhookId, url, status: null, ok: false, error: error instanceof Error ? error.message : String(error), attempt: n };
  }
}

/** The subscription that wants `eventType`, if any. */
export function subscriptionFor(store: SimStore, eventType: string): SubscriptionRecord | undefined {
  return [...store.subscriptions.values()].find((s) => s.enabledEvents.includes(eventType));
}
