import type { Logger } from 'pino';
import type { Sql } from '../db/database.js';
import { accountCalls } from './gateway/accounts.js';
import type { CallCoreOptions } from './gateway/call.js';
import { createCallCore } from './gateway/call.js';
import { catalogCalls } from './gateway/catalog.js';
import { mcpCalls } from './gateway/mcp.js';
import { sessionCalls } from './gateway/sessions.js';
import { triggerCalls } from './gateway/triggers.js';
import { webhookSubscriptionCalls } from './gateway/webhook-subscription.js';
import { createSdk } from './sdk.js';
import { sharedCallBudget } from './shared-budget.js';
import { createHostTrust } from './trust.js';
import type { ComposioGateway } from './types.js';

export interface ComposioGatewayOptions extends CallCoreOptions {
  readonly apiKey: string;
  readonly baseUrl: string;
}

/**
 * The gateway for the configured project (`COMPOSIO_*`): what the broker and the operator CLI
 * both use, so they agree on the budget and the deadline. Given the database, the budget is the
 * one every process on the project shares (`composio_budgets`); without it, this process's own.
 */
export function gatewayForProject(
  settings: { readonly apiKey: string; readonly baseUrl: string; readonly callsPerMinute: number; readonly timeoutMs: number },
  logger: Logger,
  onCall?: ComposioGatewayOptions['onCall'],
  sql?: Sql,
): ComposioGateway {
  const { apiKey, baseUrl, callsPerMinute, timeoutMs } = settings;
  const budget = sql ? sharedCallBudget({ sql, apiKey, callsPerMinute, maxWaitMs: timeoutMs }) : undefined;
  return createComposioGateway({ apiKey, baseUrl, callsPerMinute, timeoutMs, logger, budget, ...(onCall ? { onCall } : {}) });
}

/**
 * One gateway per process: one SDK, one call core (so one budget) shared by every resource's
 * calls, each resource in its own file under `gateway/`.
 */
export function createComposioGateway(options: ComposioGatewayOptions): ComposioGateway {
  const { sdk, client } = createSdk(options);
  const core = createCallCore(options);
  return {
    ...sessionCalls(core, client),
    ...accountCalls(core, sdk, client),
    ...triggerCalls(core, sdk, client),
    ...webhookSubscriptionCalls(core, sdk, client),
    ...catalogCalls(core, client),
    ...mcpCalls(core, options.apiKey, createHostTrust(options.baseUrl)),
  };
}
