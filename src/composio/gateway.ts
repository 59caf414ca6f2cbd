import {
  ComposioConnectedAccountNotRevokableError,
  ComposioConnectedAccountRevocationNotSupportedError,
} from '@composio/core';
import type { Logger } from 'pino';
import { AppError } from '../errors.js';
import { CallBudget } from './call-budget.js';
import { ComposioErrorCode, isConnectionFailure, retryAfterFromHeaders, retryAfterMs, toAppError } from './errors.js';
import {
  toConnectedAccount,
  toConnectLink,
  toSession,
  toSessionToolkit,
  toTriggerInstance,
  toTriggerType,
} from './mappers.js';
import { createSdk } from './sdk.js';
import { createHostTrust } from './trust.js';
import type { ComposioGateway } from './types.js';

export interface ComposioGatewayOptions {
  readonly apiKey: string;
  readonly baseUrl: string;
  /** The budget for HTTP requests to Composio, shared by everything this gateway does. */
  readonly callsPerMinute: number;
  /** Bound on each call, and on how long a call may queue for budget. */
  readonly timeoutMs: number;
  readonly logger: Logger;
  /** Called once per gateway call with outcome `ok` or the error code (for metrics). */
  readonly onCall?: (operation: string, outcome: string, seconds: number) => void;
}

/**
 * The gateway for the configured project (`COMPOSIO_*`): what the broker and the operator CLI
 * both use, so they agree on the budget and the deadline.
 */
export function gatewayForProject(
  settings: { readonly apiKey: string; readonly baseUrl: string; readonly callsPerMinute: number; readonly timeoutMs: number },
  logger: Logger,
  onCall?: ComposioGatewayOptions['onCall'],
): ComposioGateway {
  const { apiKey, baseUrl, callsPerMinute, timeoutMs } = settings;
  return createComposioGateway({ apiKey, baseUrl, callsPerMinute, timeoutMs, logger, ...(onCall ? { onCall } : {}) });
}

/** The events the broker routes; Composio only sends what the subscription enables. */
const WEBHOOK_EVENTS = ['composio.trigger.message', 'composio.connected_account.expired'];

export function createComposioGateway(options: ComposioGatewayOptions): ComposioGateway {
  const { sdk, client } = createSdk(options);
  const log = options.logger;
  const budget = new CallBudget({ callsPerMinute: options.callsPerMinute, maxWaitMs: options.timeoutMs });
  const isTrustedHost = createHostTrust(options.baseUrl);

  /**
   * Every Composio call goes through here: budget (`cost` = HTTP requests it makes), one
   * deadline, a 429 pausing the budget, errors mapped once, and `onCall` for metrics.
   *
   * The one retry left: a call that is safe to repeat (`idempotent`) and failed to connect
   * at all — typically a pooled keep-alive connection the other side had just closed — is
   * sent once more at once. Statuses (429, 409, 5xx) and timeouts are never retried here.
   */
  async function call<T>(
    operation: string,
    cost: number,
    context: { subject?: string; toolkit?: string; idempotent?: boolean },
    fn: (signal: AbortSignal) => Promise<T>,
  ): Promise<T> {
    const started = performance.now();
    try {
      await budget.acquire(cost);
      const signal = AbortSignal.timeout(options.timeoutMs);
      let result: T;
      try {
        result = await fn(signal);
      } catch (error) {
        if (!context.idempotent || signal.aborted || !isConnectionFailure(error)) throw error;
        await budget.acquire(cost);
        result = await fn(signal);
      }
      report(operation, 'ok', started);
      return result;
    } catch (error) {
      const pauseMs = retryAfterMs(error);
      if (pauseMs !== undefined) budget.pause(pauseMs);
      const mapped = toAppError(error, { ...context, timeoutMs: options.timeoutMs });
      logFailure(operation, mapped, error);
      report(operation, mapped.code, started);
      throw mapped;
    }
  }

  function report(operation: string, outcome: string, started: number): void {
    options.onCall?.(operation, outcome, (performance.now() - started) / 1000);
  }

  function logFailure(operation: string, mapped: AppError, cause: unknown): void {
    const detail = { operation, code: mapped.code, cause: describeCause(cause) };
    if (mapped.code === ComposioErrorCode.unavailable || mapped.code === ComposioErrorCode.rateLimited) {
      log.warn(detail, 'Composio call failed');
    } else {
      log.debug(detail, 'Composio call refused');
    }
  }

  return {
    createSession: (userId) =>
      // Through the client: core's create cannot send `enable_connection_removal`.
      call('session.create', 1, { subject: 'Session' }, async (signal) =>
        toSession(
          await client.toolRouter.session.create(
            {
              user_id: userId,
              manage_connections: {
                enable: true,
                enable_wait_for_connections: true,
                enable_connection_removal: true,
              },
              multi_account: { enable: true, max_accounts_per_toolkit: 5, require_explicit_selection: true },
            },
            { signal },
          ),
        ),
      ),

    // Through the client too, so create and get share one mapping; core's `use` would build a
    // Session object (with its own MCP-header logic) that the broker does not use.
    getSession: (sessionId) =>
      call('session.get', 1, { subject: `Session ${sessionId}`, idempotent: true }, async (signal) =>
        toSession(await client.toolRouter.session.retrieve(sessionId, { signal })),
      ),

    // Session toolkits and links go through the client: core only offers them on a Session
    // object, and building one costs a GET of the Session on every request.
    listSessionToolkits: (sessionId, page) =>
      call('session.toolkits', 1, { subject: `Session ${sessionId}`, idempotent: true }, async (signal) => {
        const raw = await client.toolRouter.session.toolkits(
          sessionId,
          {
            limit: page.limit,
            ...(page.cursor ? { cursor: page.cursor } : {}),
            ...(page.toolkits?.length ? { toolkits: [...page.toolkits] } : {}),
          },
          { signal },
        );
        return { items: raw.items.map(toSessionToolkit), nextCursor: raw.next_cursor ?? null };
      }),

    createLink: (sessionId, toolkit, link) =>
      call('session.link', 1, { subject: `Session ${sessionId}`, toolkit }, async (signal) =>
        toConnectLink(
          await client.toolRouter.session.link(
            sessionId,
            { toolkit, alias: link.alias, ...(link.callbackUrl ? { callback_url: link.callbackUrl } : {}) },
            { signal },
          ),
        ),
      ),

    // Connected accounts are read through the client: core drops `user_id`, which callers
    // need to prove that an account belongs to the installation asking.
    listConnectedAccounts: (query) =>
      call('accounts.list', 1, { subject: 'connected account', idempotent: true }, async (signal) => {
        const raw = await client.connectedAccounts.list(
          {
            user_ids: [query.userId],
            limit: query.limit,
            ...(query.cursor ? { cursor: query.cursor } : {}),
            ...(query.toolkitSlugs?.length ? { toolkit_slugs: [...query.toolkitSlugs] } : {}),
            ...(query.statuses?.length ? { statuses: [...query.statuses] } : {}),
          },
          { signal },
        );
        return { items: raw.items.map(toConnectedAccount), nextCursor: raw.next_cursor ?? null };
      }),

    getConnectedAccount: (id) =>
      call('accounts.get', 1, { subject: `connected account ${id}`, idempotent: true }, async (signal) =>
        toConnectedAccount(await client.connectedAccounts.retrieve(id, { signal })),
      ),

    deleteConnectedAccount: (id, { revoke }) =>
      call('accounts.delete', revoke ? 2 : 1, { subject: `connected account ${id}` }, async (signal) => {
        let revoked = false;
        if (revoke) {
          try {
            await sdk.connectedAccounts.revoke(id, { signal });
            revoked = true;
          } catch (error) {
            // Some apps cannot revoke programmatically, and an account that never finished
            // signing in has nothing to revoke; removing it is still what was asked.
            const harmless =
              error instanceof ComposioConnectedAccountRevocationNotSupportedError ||
              error instanceof ComposioConnectedAccountNotRevokableError;
            if (!harmless) throw error;
          }
        }
        await sdk.connectedAccounts.delete(id, { signal });
        return { revoked };
      }),

    // Through the client: core's `getType` drops `type` (webhook or poll).
    getTriggerType: (slug) =>
      call('triggerTypes.get', 1, { subject: `trigger type ${slug}`, idempotent: true }, async (signal) =>
        toTriggerType(await client.triggersTypes.retrieve(slug, { toolkit_versions: 'latest' }, { signal })),
      ),

    // Core checks the trigger type first (one more request), then upserts.
    upsertTrigger: (input) =>
      call('triggers.upsert', 2, { subject: `connected account ${input.connectedAccountId}`, idempotent: true }, async (signal) =>
        sdk.triggers.create(
          input.userId,
          input.slug,
          { connectedAccountId: input.connectedAccountId, triggerConfig: input.config },
          { signal },
        ),
      ),

    // Through the client: core's `listActive` cannot filter by user.
    listActiveTriggers: (query) =>
      call('triggers.list', 1, { subject: 'trigger', idempotent: true }, async (signal) => {
        const raw = await client.triggerInstances.listActive(
          {
            limit: query.limit,
            show_disabled: true,
            ...(query.cursor ? { cursor: query.cursor } : {}),
            ...(query.userIds?.length ? { user_ids: [...query.userIds] } : {}),
            ...(query.connectedAccountIds?.length ? { connected_account_ids: [...query.connectedAccountIds] } : {}),
            ...(query.triggerIds?.length ? { trigger_ids: [...query.triggerIds] } : {}),
          },
          { signal },
        );
        return { items: raw.items.map(toTriggerInstance), nextCursor: raw.next_cursor ?? null };
      }),

    setTriggerEnabled: (triggerId, enabled) =>
      call(enabled ? 'triggers.enable' : 'triggers.disable', 1, { subject: `trigger ${triggerId}`, idempotent: true }, async (signal) => {
        if (enabled) await sdk.triggers.enable(triggerId, { signal });
        else await sdk.triggers.disable(triggerId, { signal });
      }),

    deleteTrigger: (triggerId) =>
      call('triggers.delete', 1, { subject: `trigger ${triggerId}` }, async (signal) => {
        await sdk.triggers.delete(triggerId, { signal });
      }),

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

    // The catalog the existing client expects lives on v3, which the generated client has no
    // method for; its generic GET still sends the key and raises the same error classes.
    getCatalog: () =>
      call('catalog.get', 1, { subject: 'toolkit catalog', idempotent: true }, (signal) =>
        client.get<unknown>('/api/v3/toolkits', { query: { limit: 500, sort_by: 'usage' }, signal }),
      ),

    async fetchMcp(url, init) {
      const started = performance.now();
      if (!isTrustedHost(url)) {
        report('mcp', ComposioErrorCode.unavailable, started);
        throw new AppError(502, ComposioErrorCode.unavailable, 'the Session’s MCP endpoint is not on a trusted Composio host');
      }
      try {
        await budget.acquire(1);
      } catch (error) {
        const mapped = toAppError(error, { timeoutMs: options.timeoutMs });
        report('mcp', mapped.code, started);
        throw mapped;
      }
      let response: Response;
      try {
        response = await fetch(url, {
          method: init.method,
          headers: { ...init.headers, 'x-api-key': options.apiKey },
          ...(init.body ? { body: init.body } : {}),
          redirect: 'error',
          signal: init.signal,
        });
      } catch (error) {
        if (init.signal.aborted) throw error;
        report('mcp', ComposioErrorCode.unavailable, started);
        throw new AppError(502, ComposioErrorCode.unavailable, 'Composio’s MCP endpoint could not be reached; try again shortly.');
      }
      if (response.status === 429) budget.pause(retryAfterFromHeaders(response.headers));
      report('mcp', response.ok ? 'ok' : `http_${response.status}`, started);
      return response;
    },
    isTrustedHost,
  };
}

/** "Connection error. <- fetch failed <- other side closed": the chain a log reader needs. */
function describeCause(error: unknown): string {
  const parts: string[] = [];
  let current: unknown = error;
  for (let depth = 0; depth < 5 && current !== undefined && current !== null; depth++) {
    if (current instanceof Error) {
      const code = (current as { code?: unknown }).code;
      parts.push(typeof code === 'string' ? `${current.message} (${code})` : current.message);
      current = current.cause;
    } else {
      parts.push(String(current));
      break;
    }
  }
  return parts.join(' <- ');
}
