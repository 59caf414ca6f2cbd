import type { Client, Sdk } from '../sdk.js';
import type { ComposioGateway } from '../types.js';
import type { CallCore } from './call.js';

/** The events the broker routes; Composio only sends what the subscription enables. */
const WEBHOOK_EVENTS = ['composio.trigger.message', 'composio.connected_account.expired', 'composio.trigger.disabled'];

/**
 * A secret as Composio masks it (`whsec_****abcd`). Only a create's answer should hold the
 * secret itself; this is the guard in case one ever holds the mask instead.
 */
const looksMasked = (secret: string) => secret.includes('*');

/** The project's one webhook subscription (the operator CLI sets it up). */
export function webhookSubscriptionCalls(
  core: CallCore,
  sdk: Sdk,
  client: Client,
): Pick<ComposioGateway, 'setWebhookSubscription' | 'rotateWebhookSecret'> {
  const { call } = core;
  return {
    // Lists the project's subscription, then updates it or creates one: the two requests the
    // SDK's `set` makes, but through the client, so that it is known which happened: only a
    // create answers the secret itself (core's `set` hands back whatever the answer holds).
    setWebhookSubscription: (url) =>
      call('webhooks.set', 2, { subject: 'webhook subscription' }, async (signal) => {
        const settings = { webhook_url: url, enabled_events: WEBHOOK_EVENTS, version: 'V3' as const };
        const { items } = await client.webhookSubscriptions.list({ limit: 1 }, { signal });
        const existing = items[0];
        if (existing) {
          const updated = await client.webhookSubscriptions.update(existing.id, settings, { signal });
          return { id: updated.id, created: false };
        }
        const created = await client.webhookSubscriptions.create(settings, { signal });
        const secret = created.secret && !looksMasked(created.secret) ? created.secret : undefined;
        return { id: created.id, created: true, ...(secret ? { secret } : {}) };
      }),

    rotateWebhookSecret: (subscriptionId) =>
      call('webhooks.rotate', 1, { subject: `webhook subscription ${subscriptionId}` }, async (signal) => {
        const rotated = await sdk.webhooks.subscriptions.rotateSecret(subscriptionId, { signal });
        return { secret: rotated.secret };
      }),
  };
}
