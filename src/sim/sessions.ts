import { createAccount, requireToolkit, SIGN_IN_LIFETIME_MS, setAccountStatus } from './accounts.js';
import { findToolkit, TOOLKITS, type ToolkitDef } from './catalog.js';
import { badRequest, SimCode, SimError } from './errors.js';
import { nanoId } from './ids.js';
import { asObject, type Json, optionalBoolean, optionalString, requiredString } from './input.js';
import type { AccountRecord, LinkRecord, SessionRecord, SimStore } from './store.js';
import type { SessionConfigWire } from './wire.js';

/** Tool Router Sessions, their toolkit view, connect links and the consent that completes them. */

/** How long a connect link stays usable: Composio's ten minutes (composio-api.md §10 row 12). */
const LINK_LIFETIME_MS = SIGN_IN_LIFETIME_MS;
const USABLE: ReadonlySet<string> = new Set(['ACTIVE', 'INITIATED', 'INITIALIZING']);

export function createSession(store: SimStore, rawBody: unknown): SessionRecord {
  const body = asObject(rawBody);
  const userId = requiredString(body, 'user_id');
  const session: SessionRecord = {
    id: nanoId('trs'),
    userId,
    config: sessionConfig(userId, body),
    createdAt: store.nowIso(),
  };
  store.sessions.set(session.id, session);
  return session;
}

export function getSession(store: SimStore, id: string): SessionRecord {
  const session = store.sessions.get(id);
  if (!session) throw new SimError(404, SimCode.sessionNotFound, `Tool router session ${id} not found`);
  return session;
}

export function deleteSession(store: SimStore, id: string): void {
  getSession(store, id);
  store.sessions.delete(id);
  for (const [mcpId, mcp] of store.mcpSessions) {
    if (mcp.toolRouterSessionId === id) store.mcpSessions.delete(mcpId);
  }
}

/** Request `enable`/`disable` → answer `enabled`/`disabled`, with Composio's defaults filled in. */
function sessionConfig(userId: string, body: Json): SessionConfigWire {
  const manage = asObject(body.manage_connections, 'manage_connections');
  const multi = body.multi_account === undefined ? undefined : asObject(body.multi_account, 'multi_account');
  const toolkits = body.toolkits === undefined ? undefined : asObject(body.toolkits, 'toolkits');
  const config: SessionConfigWire = {
    user_id: userId,
    manage_connections: {
      enabled: optionalBoolean(manage, 'enable') ?? true,
      ...(optionalString(manage, 'callback_url') ? { callback_url: optionalString(manage, 'callback_url') as string } : {}),
      enable_wait_for_connections: optionalBoolean(manage, 'enable_wait_for_connections') ?? false,
      enable_connection_removal: optionalBoolean(manage, 'enable_connection_removal') ?? true,
    },
    // On unless turned off: it decides whether the workbench meta tools are listed.
    workbench: {
      enable: optionalBoolean(asObject(body.workbench, 'workbench'), 'enable') ?? true,
      proxy_execution_enabled: false,
      auto_offload_threshold: 20000,
      sandbox_size: 'standard',
    },
    preload: { tools: [] },
    search: {},
    execute: {},
  };
  if (toolkits) {
    if (Array.isArray(toolkits.enable)) config.toolkits = { enabled: toolkits.enable.map(String) };
    else if (Array.isArray(toolkits.disable)) config.toolkits = { disabled: toolkits.disable.map(String) };
    else throw badRequest('toolkits must have enable or disable');
  }
  if (body.auth_configs !== undefined) config.auth_configs = asObject(body.auth_configs, 'auth_configs') as Record<string, string>;
  if (body.connected_accounts !== undefined) {
    config.connected_accounts = asObject(body.connected_accounts, 'connected_accounts') as Record<string, string[]>;
  }
  if (multi) {
    const max = multi.max_accounts_per_toolkit ?? 5;
    if (!Number.isInteger(max) || (max as number) < 1 || (max as number) > 50) {
      throw badRequest('multi_account.max_accounts_per_toolkit must be an integer between 1 and 50');
    }
    config.multi_account = {
      enable: optionalBoolean(multi, 'enable') ?? false,
      max_accounts_per_toolkit: max as number,
      require_explicit_selection: optionalBoolean(multi, 'require_explicit_selection') ?? false,
    };
  }
  return config;
}

/**
 * The toolkits a Session holds, in catalog order: every toolkit of the catalog ("when you
 * create a session, all toolkits are available") less the disabled ones, or the enabled ones;
 * `requested` (the `toolkits` filter) overrides the Session's own configuration.
 */
export function sessionToolkitSlugs(
  session: SessionRecord,
  requested: string[] | undefined,
  catalog: readonly ToolkitDef[] = TOOLKITS,
): string[] {
  if (requested) return requested.map((s) => s.toLowerCase()).filter((s) => findToolkit(s) !== undefined);
  const config = session.config.toolkits;
  if (config && 'enabled' in config) return config.enabled.filter((s) => findToolkit(s) !== undefined);
  const disabled = new Set(config && 'disabled' in config ? config.disabled : []);
  return catalog.map((t) => t.slug).filter((s) => !disabled.has(s));
}

/**
 * The account a Session uses for each toolkit: a pinned one, else the newest ACTIVE, else the
 * newest of any status. Which account Composio shows when several exist is unconfirmed. For
 * every toolkit at once (a Session lists a thousand toolkits): the Session user's accounts read
 * once, by toolkit, newest first.
 */
export function selectedAccounts(store: SimStore, session: SessionRecord): (toolkit: string) => AccountRecord | undefined {
  const mine = new Map<string, AccountRecord[]>();
  for (const account of store.accounts.values()) {
    if (account.userId !== session.userId) continue;
    const list = mine.get(account.toolkit) ?? [];
    list.push(account);
    mine.set(account.toolkit, list);
  }
  for (const list of mine.values()) list.sort((a, b) => b.seq - a.seq);
  return (toolkit) => {
    const pinned = session.config.connected_accounts?.[toolkit]?.[0];
    if (pinned) return store.accounts.get(pinned);
    const list = mine.get(toolkit) ?? [];
    return list.find((a) => a.status === 'ACTIVE') ?? list[0];
  };
}

export function createLink(store: SimStore, session: SessionRecord, rawBody: unknown): LinkRecord {
  const body = asObject(rawBody);
  const toolkit = requireToolkit(requiredString(body, 'toolkit'));
  const alias = optionalString(body, 'alias')?.trim() || null;
  const callbackUrl = optionalString(body, 'callback_url') ?? null;
  if (toolkit.noAuth) throw badRequest(`Toolkit ${toolkit.slug} does not require authentication`);
  const multi = session.config.multi_account;
  if (multi?.enable) {
    const usable = [...store.accounts.values()].filter(
      (a) => a.userId === session.userId && a.toolkit === toolkit.slug && USABLE.has(a.status),
    ).length;
    // Guess: the status and wording for a full toolkit are undocumented.
    if (usable >= multi.max_accounts_per_toolkit) {
      throw badRequest(`Maximum of ${multi.max_accounts_per_toolkit} connected accounts reached for toolkit ${toolkit.slug}`);
    }
  }
  const account = createAccount(store, {
    userId: session.userId,
    toolkit: toolkit.slug,
    alias,
    status: 'INITIATED',
    ...(session.config.auth_configs?.[toolkit.slug] ? { authConfigId: session.config.auth_configs[toolkit.slug] } : {}),
  });
  const link: LinkRecord = {
    token: nanoId('ln', 16),
    accountId: account.id,
    sessionId: session.id,
    userId: session.userId,
    toolkit: toolkit.slug,
    alias,
    callbackUrl,
    expiresAt: new Date(store.now().getTime() + LINK_LIFETIME_MS),
    outcome: 'pending',
  };
  store.links.set(link.token, link);
  return link;
}

export function linkWire(store: SimStore, link: LinkRecord) {
  return {
    link_token: link.token,
    redirect_url: store.consentUrl(link.token),
    expires_at: link.expiresAt.toISOString(),
    connected_account_id: link.accountId,
    experimental: { account_type: 'PRIVATE' },
  };
}

export function getLink(store: SimStore, token: string): LinkRecord {
  const link = store.links.get(token);
  if (!link) throw new SimError(404, SimCode.notFound, 'This connect link does not exist');
  return link;
}

/** The person's answer on the consent page: the pending account becomes ACTIVE, or FAILED. */
export function answerConsent(
  store: SimStore,
  token: string,
  decision: 'authorize' | 'deny',
): { link: LinkRecord; account: AccountRecord } {
  const link = getLink(store, token);
  if (link.outcome !== 'pending') throw new SimError(409, SimCode.badRequest, `This link was already ${link.outcome}`);
  if (store.now() > link.expiresAt) throw new SimError(410, SimCode.badRequest, 'This connect link has expired');
  const account = store.accounts.get(link.accountId);
  if (!account) throw new SimError(404, SimCode.accountNotFound, 'The account this link was for has been deleted');
  if (decision === 'authorize') {
    setAccountStatus(store, account, 'ACTIVE');
    link.outcome = 'authorized';
  } else {
    setAccountStatus(store, account, 'FAILED', 'The user denied access');
    link.outcome = 'denied';
  }
  return { link, account };
}
