import type { Sdk } from '../sdk.js';
import type { ComposioGateway } from '../types.js';
import type { CallCore } from './call.js';

/** The events the broker routes; Composio only sends what the subscription enables. */
const WEBHOOK_EVENTS = ['composio.trigger.message', 'composio.connected_account.expired'];

/** The project's one webhook subscription (the operator CLI sets it up). */
export function webhookSubscriptionCalls(
  core: CallCore,
  sdk: Sdk,
): Pick<ComposioGateway, 'setWebhookSubscription' | 'rotateWebhookSecret'> {
  const { call } = core;
  return {
    // Core lists the project's subscription, then updates it or creates one: two requests.
    setWebhookSubscription: (url) =>
      call('webhooks.set', 2, { subject: 'webhook subscription' }, async (signal) => {
        const subscription = await sdk.webhooks.subscriptions.set(
          { webhookUrl: url, enabledEvents: WEBHOOK_EVENTS, version: 'V3' },
          { signal },
        );
        return { id: subscription.id, ...(subscription.secret ? { secret: subscription.secret } : {}) };
      }),

    rotateWebhookSecret: (subscriptionId) =>
      call('webhooks.rotate', 1, { subject: `webhook subscription ${subscriptionId}` }, async (signal) => {
        const rotated = await sdk.webhooks.subscriptions.rotateSecret(subscriptionId, { signal });
        return { secret: rotated.secret };
      }),
  };
}
