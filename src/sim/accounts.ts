import { randomBytes } from 'node:crypto';
import { CONNECTED_ACCOUNT_STATUSES } from '../composio/types.js';
import { findToolkit, type ToolkitDef } from './catalog.js';
import { badRequest, notFound, SimCode, SimError } from './errors.js';
import { nanoId, uuid, wordId } from './ids.js';
import type { AccountRecord, AccountStatus, AuthConfigRecord, SimStore } from './store.js';

/** Connected accounts and the auth configs they hang off. */

/** Composio's list, from the broker's own types: the simulator answers what the broker reads. */
export const ACCOUNT_STATUSES: readonly AccountStatus[] = CONNECTED_ACCOUNT_STATUSES;

export function getAccount(store: SimStore, id: string): AccountRecord {
  const account = store.accounts.get(id);
  if (!account) throw new SimError(404, SimCode.accountNotFound, `Connected account ${id} not found`);
  return account;
}

export function requireToolkit(slug: string): ToolkitDef {
  const toolkit = findToolkit(slug);
  if (!toolkit) throw notFound(`Toolkit ${slug}`, SimCode.toolkitNotFound);
  return toolkit;
}

/**
 * The auth config a new account of `toolkit` would use. Like Composio, the managed one is
 * created on first use; a toolkit without managed auth and without a project auth config
 * cannot be linked. Status 400 for that is a guess (the message is Composio's).
 */
function resolveAuthConfig(store: SimStore, toolkit: ToolkitDef, pinned?: string): AuthConfigRecord {
  if (pinned) {
    const config = store.authConfigs.get(pinned);
    if (!config || config.toolkit !== toolkit.slug) throw new SimError(404, SimCode.authConfigNotFound, `Auth config ${pinned} not found`);
    return config;
  }
  const existing = [...store.authConfigs.values()].find((c) => c.toolkit === toolkit.slug);
  if (existing) return existing;
  const scheme = toolkit.managedAuthSchemes[0];
  if (scheme === undefined) {
    throw new SimError(
      400,
      SimCode.authConfigRequired,
      `Composio does not manage auth for toolkit ${toolkit.slug} and no auth config without required fields is available`,
      `Create an auth config for ${toolkit.slug} with your own credentials and pass it in auth_configs`,
    );
  }
  const created: AuthConfigRecord = {
    id: nanoId('ac'),
    uuid: uuid(),
    toolkit: toolkit.slug,
    authScheme: scheme,
    isComposioManaged: true,
    createdAt: store.nowIso(),
  };
  store.authConfigs.set(created.id, created);
  return created;
}

/**
 * Aliases are "unique per entity and toolkit within the project" (Composio's words). The 409
 * on a duplicate, compared case-insensitively, is a guess: the status is undocumented.
 */
function assertAliasFree(store: SimStore, userId: string, toolkit: string, alias: string): void {
  const wanted = alias.toLowerCase();
  const taken = [...store.accounts.values()].some((a) => a.userId === userId && a.toolkit === toolkit && a.alias?.toLowerCase() === wanted);
  if (taken) {
    throw new SimError(
      409,
      SimCode.accountAliasTaken,
      `A connected account with alias '${alias}' already exists for this user and toolkit ${toolkit}`,
      'Choose a different alias or delete the existing connected account',
    );
  }
}

export function createAccount(
  store: SimStore,
  input: { userId: string; toolkit: string; alias?: string | null; status?: AccountStatus; authConfigId?: string },
): AccountRecord {
  const toolkit = requireToolkit(input.toolkit);
  if (toolkit.noAuth) throw badRequest(`Toolkit ${toolkit.slug} does not require authentication`);
  const authConfig = resolveAuthConfig(store, toolkit, input.authConfigId);
  const alias = input.alias?.trim() ? input.alias.trim() : null;
  if (alias) assertAliasFree(store, input.userId, toolkit.slug, alias);
  const now = store.nowIso();
  const status = input.status ?? 'INITIATED';
  const account: AccountRecord = {
    id: nanoId('ca'),
    uuid: uuid(),
    wordId: wordId(),
    userId: input.userId,
    toolkit: toolkit.slug,
    authConfigId: authConfig.id,
    alias,
    status,
    statusReason: null,
    accessToken: status === 'ACTIVE' ? simulatedToken() : null,
    createdAt: now,
    updatedAt: now,
    seq: store.nextSeq(),
  };
  store.accounts.set(account.id, account);
  return account;
}

export function setAccountStatus(store: SimStore, account: AccountRecord, status: AccountStatus, reason: string | null = null): void {
  account.status = status;
  account.statusReason = reason;
  account.accessToken = status === 'ACTIVE' ? (account.accessToken ?? simulatedToken()) : null;
  account.updatedAt = store.nowIso();
}

/** Composio's hosted connect links expire after 10 minutes (composio-api.md §10 row 12). */
export const SIGN_IN_LIFETIME_MS = 10 * 60 * 1000;
/** Composio's `status_reason` for a sign-in whose link expired unused. */
const ABANDONED_SIGN_IN_REASON = 'Connection initiation did not complete within 10 minutes';

/**
 * Sign-ins not completed within the link's lifetime are abandoned: they take the status of the
 * simulator's reading (`readings.abandonedSignIn`) with Composio's reason, by the simulator's
 * clock. Run before every request is answered, so every answer sees the same world.
 */
export function expireAbandonedSignIns(store: SimStore): void {
  const cutoff = store.now().getTime() - SIGN_IN_LIFETIME_MS;
  for (const account of store.accounts.values()) {
    const started = account.status === 'INITIATED' || account.status === 'INITIALIZING';
    if (!started || account.statusReason === ABANDONED_SIGN_IN_REASON || Date.parse(account.createdAt) > cutoff) continue;
    const status = store.readings.abandonedSignIn === 'INITIATED' ? account.status : store.readings.abandonedSignIn;
    setAccountStatus(store, account, status, ABANDONED_SIGN_IN_REASON);
  }
}

export interface AccountFilter {
  userIds?: string[] | undefined;
  toolkitSlugs?: string[] | undefined;
  statuses?: string[] | undefined;
  authConfigIds?: string[] | undefined;
  accountIds?: string[] | undefined;
  ascending?: boolean | undefined;
}

export function listAccounts(store: SimStore, filter: AccountFilter): AccountRecord[] {
  const statuses = filter.statuses?.map((s) => s.toUpperCase());
  for (const s of statuses ?? []) {
    if (!(ACCOUNT_STATUSES as readonly string[]).includes(s)) throw badRequest(`Invalid status: ${s}`);
  }
  const toolkits = filter.toolkitSlugs?.map((s) => s.toLowerCase());
  const matches = [...store.accounts.values()].filter(
    (a) =>
      (!filter.userIds || filter.userIds.includes(a.userId)) &&
      (!toolkits || toolkits.includes(a.toolkit)) &&
      (!statuses || statuses.includes(a.status)) &&
      (!filter.authConfigIds || filter.authConfigIds.includes(a.authConfigId)) &&
      (!filter.accountIds || filter.accountIds.includes(a.id)),
  );
  // Composio lists newest first by default.
  return matches.sort((a, b) => (filter.ascending ? a.seq - b.seq : b.seq - a.seq));
}

/**
 * Revoking asks the provider to invalidate the tokens. Composio answers 400 for apps that
 * cannot do it and 409 for an account not in a revokable state (both mapped by the SDK).
 */
export function revokeAccount(
  store: SimStore,
  id: string,
): { revoked_tokens: string[]; connected_account: { id: string; status: string } } {
  const account = getAccount(store, id);
  const toolkit = requireToolkit(account.toolkit);
  if (!toolkit.revocable) {
    throw new SimError(400, SimCode.accountRevocationUnsupported, `Revocation is not supported for toolkit ${toolkit.slug}`);
  }
  if (account.status !== 'ACTIVE') {
    throw new SimError(409, SimCode.accountNotRevokable, `Connected account ${id} is not in a revokable state (${account.status})`);
  }
  setAccountStatus(store, account, 'REVOKED', 'Revoked by the project');
  return { revoked_tokens: ['access_token', 'refresh_token'], connected_account: { id, status: 'REVOKED' } };
}

/** Deleting an account also removes its triggers (a trigger cannot outlive its connection). */
export function deleteAccount(store: SimStore, id: string): void {
  getAccount(store, id);
  store.accounts.delete(id);
  for (const [triggerId, trigger] of store.triggers) {
    if (trigger.connectedAccountId === id) store.triggers.delete(triggerId);
  }
}

function simulatedToken(): string {
  return `sim-${randomBytes(18).toString('base64url')}`;
}
