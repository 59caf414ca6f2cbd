/**
 * The broker's only door to Composio. Nothing outside `src/composio/` imports the SDK; the
 * rest of the codebase sees the narrow `ComposioGateway`, its `ComposioFailure` and these helpers.
 */
export { createComposioGateway, gatewayForProject, type ComposioGatewayOptions } from './gateway.js';
export type * from './types.js';
export { authConfigRequiredMessage, isSignedOutText, reconnectMessage } from './errors.js';
export {
  ComposioFailure,
  isComposioFailure,
  isComposioNotFound,
  type ComposioFailureKind,
  type ComposioRefusal,
} from './failure.js';
export { signWebhook, verifyWebhookSignature, type SignatureFailure, type VerifyWebhookInput } from './webhook-signature.js';
export { parseWebhookEvent, type WebhookEvent } from './webhook-events.js';
export { createHostTrust } from './trust.js';
