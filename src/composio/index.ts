/**
 * The broker's only door to Composio. Nothing outside `src/composio/` imports the SDK; the
 * rest of the codebase sees the narrow `ComposioGateway`, its `ComposioFailure` and these helpers.
 */

export { type Budget, CallBudget } from './call-budget.js';
export { runAsCaller } from './caller.js';
export { isSignedOutText, reconnectMessage } from './errors.js';
export {
  ComposioFailure,
  type ComposioFailureKind,
  type ComposioRefusal,
  isComposioFailure,
  isComposioNotFound,
} from './failure.js';
export { type ComposioGatewayOptions, createComposioGateway, gatewayForProject } from './gateway.js';
export { projectDigest } from './shared-budget.js';
export { createHostTrust } from './trust.js';
export type * from './types.js';
export { parseWebhookEvent } from './webhook-events.js';
export { signWebhook, type VerifyWebhookInput, verifyWebhookSignature } from './webhook-signature.js';
