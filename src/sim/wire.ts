import { findToolkit, logoUrl, TOOLKIT_VERSION, type ToolkitDef, TRIGGER_TYPES, type TriggerTypeDef } from './catalog.js';
import { metaToolNames } from './meta-tools.js';
import type { AccountRecord, AuthConfigRecord, SessionRecord, SimStore, SubscriptionRecord, TriggerRecord } from './store.js';

/** Records → Composio's JSON, field for field as in `composio-api.md` and the client's wire types. */

/** The Session record already keeps its config in Composio's shape. */
export type { SessionConfigWire } from './store.js';

export function sessionWire(store: SimStore, session: SessionRecord, options: { created: boolean }) {
  return {
    session_id: session.id,
    mcp: { type: 'http', url: store.mcpUrl(session.id) },
    tool_router_tools: metaToolNames(session.config),
    config: session.config,
    config_version: 1,
    ...(options.created
      ? {
          experimental: {
            assistive_prompt: 'Use COMPOSIO_SEARCH_TOOLS to find tools, then COMPOSIO_MULTI_EXECUTE_TOOL to run them.',
          },
          warnings: [],
        }
      : {}),
  };
}

/** The provider-side state Composio keeps per account; tokens only once ACTIVE. */
function accountState(store: SimStore, account: AccountRecord) {
  if (account.status === 'ACTIVE') {
    return {
      authScheme: 'OAUTH2',
      val: {
        status: 'ACTIVE',
        access_token: account.accessToken ?? '',
        token_type: 'Bearer',
        refresh_token: null,
        expires_in: 3599,
        scope: null,
      },
    };
  }
  if (account.status === 'INITIATED') {
    const link = [...store.links.values()].find((l) => l.accountId === account.id);
    return { authScheme: 'OAUTH2', val: { status: 'INITIATED', redirectUrl: link ? store.consentUrl(link.token) : '' } };
  }
  return { authScheme: 'OAUTH2', val: { status: account.status } };
}

/**
 * An account as list and get answer it (and the expiry event carries it): `user_id` only under
 * the kinder reading (`readings.accountUserIds`), as Composio deprecates it.
 */
export function accountWire(store: SimStore, account: AccountRecord, options: { withState: boolean } = { withState: true }) {
  const authConfig = store.authConfigs.get(account.authConfigId);
  return {
    id: account.id,
    word_id: account.wordId,
    alias: account.alias,
    ...(store.readings.accountUserIds ? { user_id: account.userId } : {}),
    status: account.status,
    status_reason: account.statusReason,
    is_disabled: false,
    toolkit: { slug: account.toolkit },
    auth_config: {
      id: account.authConfigId,
      auth_scheme: authConfig?.authScheme ?? 'OAUTH2',
      is_composio_managed: authConfig?.isComposioManaged ?? true,
      is_disabled: false,
    },
    ...(options.withState ? { state: accountState(store, account) } : {}),
    data: {},
    params: {},
    created_at: account.createdAt,
    updated_at: account.updatedAt,
    experimental: { account_type: 'PRIVATE' },
  };
}

export function sessionToolkitWire(toolkit: ToolkitDef, account: AccountRecord | undefined, authConfig: AuthConfigRecord | undefined) {
  return {
    name: toolkit.name,
    slug: toolkit.slug,
    enabled: true,
    is_no_auth: toolkit.noAuth,
    composio_managed_auth_schemes: [...toolkit.managedAuthSchemes],
    meta: { logo: logoUrl(toolkit.slug), description: toolkit.description },
    connected_account: account
      ? {
          id: account.id,
          user_id: account.userId,
          status: account.status,
          created_at: account.createdAt,
          auth_config: {
            id: account.authConfigId,
            auth_scheme: authConfig?.authScheme ?? 'OAUTH2',
            is_composio_managed: authConfig?.isComposioManaged ?? true,
          },
        }
      : null,
  };
}

export function authConfigWire(store: SimStore, config: AuthConfigRecord) {
  const toolkit = findToolkit(config.toolkit);
  const connections = [...store.accounts.values()].filter((a) => a.authConfigId === config.id).length;
  return {
    id: config.id,
    uuid: config.uuid,
    type: config.isComposioManaged ? 'default' : 'custom',
    name: `${toolkit?.name ?? config.toolkit} Auth Config`,
    toolkit: { slug: config.toolkit, logo: logoUrl(config.toolkit) },
    auth_scheme: config.authScheme,
    is_composio_managed: config.isComposioManaged,
    status: 'ENABLED',
    no_of_connections: connections,
    created_at: config.createdAt,
    last_updated_at: config.createdAt,
    created_by: 'simulator',
    credentials: {},
    expected_input_fields: [],
    tool_access_config: { tools_for_connected_account_creation: [], tools_available_for_execution: [] },
    is_enabled_for_tool_router: true,
    proxy_config: null,
  };
}

export function triggerTypeWire(type: TriggerTypeDef) {
  const toolkit = findToolkit(type.toolkit);
  return {
    slug: type.slug,
    name: type.name,
    description: type.description,
    instructions: type.instructions,
    type: type.type,
    toolkit: { slug: type.toolkit, name: toolkit?.name ?? type.toolkit, logo: logoUrl(type.toolkit) },
    config: type.config,
    payload: type.payload,
    version: TOOLKIT_VERSION,
  };
}

export function triggerInstanceWire(store: SimStore, trigger: TriggerRecord) {
  const account = store.accounts.get(trigger.connectedAccountId);
  return {
    id: trigger.id,
    uuid: trigger.uuid,
    connected_account_id: trigger.connectedAccountId,
    connected_account_uuid: account?.uuid ?? '',
    user_id: trigger.userId,
    trigger_name: trigger.slug,
    trigger_config: trigger.config,
    state: {},
    version: TOOLKIT_VERSION,
    trigger_data: '',
    updated_at: trigger.updatedAt,
    disabled_at: trigger.disabledAt,
    // Deprecated camelCase copies that Composio still sends.
    disabledAt: trigger.disabledAt,
    connectedAccountId: trigger.connectedAccountId,
    triggerName: trigger.slug,
    updatedAt: trigger.updatedAt,
    triggerConfig: trigger.config,
  };
}

/**
 * A subscription as Composio answers it. Composio's docs say the signing secret is shown in full
 * only by create and `rotate_secret`; every other answer (list, get, update) masks it, so the
 * simulator does too: a client that takes a masked value for the secret fails here as it would there.
 */
export function subscriptionWire(subscription: SubscriptionRecord, options: { fullSecret?: boolean } = {}) {
  return {
    id: subscription.id,
    webhook_url: subscription.webhookUrl,
    version: subscription.version,
    enabled_events: subscription.enabledEvents,
    secret: options.fullSecret ? subscription.secret : maskedSecret(subscription.secret),
    created_at: subscription.createdAt,
    updated_at: subscription.updatedAt,
  };
}

/** A secret as Composio shows it outside create and rotate: a fixed prefix and its last four characters. */
function maskedSecret(secret: string): string {
  return `whsec_****${secret.slice(-4)}`;
}

/** One item of the toolkit catalog (`GET /api/v3/toolkits`). */
export function catalogToolkitWire(toolkit: ToolkitDef) {
  return {
    slug: toolkit.slug,
    name: toolkit.name,
    type: 'native',
    auth_schemes: [...toolkit.authSchemes],
    composio_managed_auth_schemes: [...toolkit.managedAuthSchemes],
    is_local_toolkit: false,
    no_auth: toolkit.noAuth,
    auth_guide_url: null,
    deprecated: { toolkitId: `tk_${toolkit.slug}` },
    meta: {
      created_at: '2024-06-01T00:00:00.000Z',
      updated_at: '2025-09-09T00:00:00.000Z',
      description: toolkit.description,
      logo: logoUrl(toolkit.slug),
      app_url: null,
      categories: [{ id: toolkit.category, name: toolkit.category.replace(/-/g, ' ') }],
      triggers_count: TRIGGER_TYPES.filter((t) => t.toolkit === toolkit.slug).length,
      tools_count: toolkit.tools.length,
      version: TOOLKIT_VERSION,
    },
  };
}
