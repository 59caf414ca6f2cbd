import type { Client } from './sdk.js';
import {
  CONNECTED_ACCOUNT_STATUSES,
  type ConnectedAccount,
  type ConnectedAccountStatus,
  type ConnectLink,
  type SessionToolkit,
  type ToolRouterSession,
  type TriggerInstance,
  type TriggerType,
} from './types.js';

/**
 * Composio's wire objects (snake_case) → the broker's types. Only named fields are copied, so
 * a connected account's `state`, `data` and `params` (where its tokens live) never leave here.
 */

type Raw<F extends (...args: never[]) => unknown> = Awaited<ReturnType<F>>;
type RawSession = Raw<Client['toolRouter']['session']['create']> | Raw<Client['toolRouter']['session']['retrieve']>;
type RawSessionToolkit = Raw<Client['toolRouter']['session']['toolkits']>['items'][number];
type RawAccount = Raw<Client['connectedAccounts']['list']>['items'][number];
type RawLink = Raw<Client['toolRouter']['session']['link']>;
type RawTriggerType = Raw<Client['triggersTypes']['retrieve']>;
type RawTriggerTypeItem = Raw<Client['triggersTypes']['list']>['items'][number];
type RawTriggerInstance = Raw<Client['triggerInstances']['listActive']>['items'][number];

const STATUSES: ReadonlySet<string> = new Set(CONNECTED_ACCOUNT_STATUSES);

/** A status outside Composio's documented enum is treated as not usable. */
function toStatus(value: string): ConnectedAccountStatus {
  const upper = value.toUpperCase();
  return STATUSES.has(upper) ? (upper as ConnectedAccountStatus) : 'INACTIVE';
}

export function toSession(raw: RawSession): ToolRouterSession {
  const multiAccount: unknown = raw.config.multi_account;
  return {
    sessionId: raw.session_id,
    mcpUrl: raw.mcp.url,
    multiAccountEnabled:
      typeof multiAccount === 'object' && multiAccount !== null && (multiAccount as { enable?: unknown }).enable === true,
  };
}

export function toSessionToolkit(raw: RawSessionToolkit): SessionToolkit {
  const account = raw.connected_account;
  // The wire type has no alias here; pass one through if Composio ever sends it.
  const alias: unknown = account ? (account as { alias?: unknown }).alias : undefined;
  return {
    slug: raw.slug,
    name: raw.name,
    isNoAuth: raw.is_no_auth,
    connectedAccount: account
      ? { id: account.id, status: toStatus(account.status), ...(typeof alias === 'string' ? { alias } : {}) }
      : null,
  };
}

/**
 * `owner` is the user the list was filtered by. The answer's own `user_id` is never read:
 * Composio deprecates it and stops sending it.
 */
export function toConnectedAccount(raw: RawAccount, owner: string): ConnectedAccount {
  const alias: unknown = (raw as { alias?: unknown }).alias;
  return {
    id: raw.id,
    alias: typeof alias === 'string' && alias !== '' ? alias : null,
    status: toStatus(raw.status),
    toolkit: raw.toolkit.slug,
    userId: owner,
    createdAt: raw.created_at,
  };
}

export function toConnectLink(raw: RawLink): ConnectLink {
  // `expires_at` is in Composio's answer but not in this client version's type.
  const expiresAt: unknown = (raw as { expires_at?: unknown }).expires_at;
  return {
    url: raw.redirect_url,
    connectedAccountId: raw.connected_account_id,
    expiresAt: typeof expiresAt === 'string' ? expiresAt : null,
  };
}

export function toTriggerType(raw: RawTriggerType | RawTriggerTypeItem): TriggerType {
  return {
    slug: raw.slug,
    toolkit: raw.toolkit.slug,
    name: raw.name ?? raw.slug,
    description: raw.description ?? '',
    type: raw.type === 'webhook' ? 'webhook' : 'poll',
    configSchema: (raw.config ?? {}) as Record<string, unknown>,
    payloadSchema: (raw.payload ?? {}) as Record<string, unknown>,
  };
}

export function toTriggerInstance(raw: RawTriggerInstance): TriggerInstance {
  return {
    id: raw.id,
    triggerSlug: raw.trigger_name,
    connectedAccountId: raw.connected_account_id,
    userId: raw.user_id ?? null,
    config: (raw.trigger_config ?? {}) as Record<string, unknown>,
    enabled: raw.disabled_at === null || raw.disabled_at === undefined,
    updatedAt: raw.updated_at ?? null,
  };
}
