import type { ComposioGateway, ConnectedAccount, ConnectedAccountStatus, Page, SessionToolkit } from '../composio/index.js';
import { isComposioFailure } from '../composio/index.js';
import type { Db } from '../db/database.js';
import type { Installation } from '../installations/installations.js';
import { withSession } from './session.js';

/** One account as the client sees it: id, label and lifecycle status, nothing else. */
export interface AccountView {
  id: string;
  alias?: string;
  status: ConnectedAccountStatus;
}

export interface ServiceView {
  /** Usable now: an `ACTIVE` account, or an app that needs no sign-in. */
  connected: boolean;
  /** A sign-in was started and not finished. */
  pending: boolean;
  status: ConnectedAccountStatus | 'NOT_CONNECTED';
  accounts: AccountView[];
}

/** What Composio lists per page; the most it gives (and the first version used). */
const PAGE_SIZE = 50;
/** A runaway cursor must not cost more than this many calls per sweep. */
const MAX_PAGES = 20;
const PENDING: ReadonlySet<string> = new Set(['INITIALIZING', 'INITIATED', 'PENDING']);

/** Follows `nextCursor` to the end, at most `MAX_PAGES` pages; a repeated cursor ends the sweep. */
export async function sweep<T>(fetchPage: (cursor: string | undefined) => Promise<Page<T>>): Promise<T[]> {
  const items: T[] = [];
  const seen = new Set<string>();
  let cursor: string | undefined;
  for (let page = 0; page < MAX_PAGES; page += 1) {
    const result = await fetchPage(cursor);
    items.push(...result.items);
    if (!result.nextCursor || seen.has(result.nextCursor)) break;
    seen.add(result.nextCursor);
    cursor = result.nextCursor;
  }
  return items;
}

/** Every connected account of the installation's Composio user (optionally for some toolkits). */
export function listAccounts(composio: ComposioGateway, userId: string, toolkits?: readonly string[]): Promise<ConnectedAccount[]> {
  return sweep((cursor) =>
    composio.listConnectedAccounts({ userId, cursor, limit: PAGE_SIZE, ...(toolkits ? { toolkitSlugs: toolkits } : {}) }),
  );
}

/**
 * The installation's whole multi-account inventory: the Session's toolkits (no-auth apps and
 * the account each has selected) merged with every connected account of the user. Exactly the
 * two paginated sweeps; when the project key may not list accounts, the Session's view alone.
 */
export async function inventory(
  db: Db,
  composio: ComposioGateway,
  installation: Pick<Installation, 'id' | 'composioUserId'>,
  only?: readonly string[],
): Promise<Record<string, ServiceView>> {
  const toolkits = await withSession(db, composio, installation, (session) =>
    sweep<SessionToolkit>((cursor) =>
      composio.listSessionToolkits(session.sessionId, { cursor, limit: PAGE_SIZE, ...(only ? { toolkits: only } : {}) }),
    ),
  );
  let accounts: ConnectedAccount[];
  try {
    accounts = await listAccounts(composio, installation.composioUserId, only);
  } catch (error) {
    if (!isComposioFailure(error, 'refused', 'forbidden')) throw error;
    accounts = [];
  }
  return mergeInventory(toolkits, accounts, installation.composioUserId, only);
}

export function mergeInventory(
  toolkits: readonly SessionToolkit[],
  accounts: readonly ConnectedAccount[],
  userId: string,
  only?: readonly string[],
): Record<string, ServiceView> {
  const byToolkit = new Map<string, { noAuth: boolean; accounts: Map<string, AccountView & { createdAt: string }> }>();
  const entry = (slug: string) => {
    let found = byToolkit.get(slug);
    if (!found) {
      found = { noAuth: false, accounts: new Map() };
      byToolkit.set(slug, found);
    }
    return found;
  };
  for (const account of accounts) {
    // The list is asked for this user only; an account of anyone else is never shown.
    if (account.userId !== userId) continue;
    entry(account.toolkit).accounts.set(account.id, {
      id: account.id,
      ...(account.alias ? { alias: account.alias } : {}),
      status: account.status,
      createdAt: account.createdAt,
    });
  }
  for (const toolkit of toolkits) {
    if (toolkit.isNoAuth) entry(toolkit.slug).noAuth = true;
    const selected = toolkit.connectedAccount;
    if (selected && !entry(toolkit.slug).accounts.has(selected.id)) {
      entry(toolkit.slug).accounts.set(selected.id, {
        id: selected.id,
        ...(selected.alias ? { alias: selected.alias } : {}),
        status: selected.status,
        createdAt: '',
      });
    }
  }

  const services: Record<string, ServiceView> = {};
  const slugs = only ?? [...byToolkit.keys()].sort();
  for (const slug of slugs) {
    const found = byToolkit.get(slug);
    // Newest first, so the service's status follows the latest attempt when none works.
    const list = [...(found?.accounts.values() ?? [])].sort((a, b) => b.createdAt.localeCompare(a.createdAt));
    const active = list.some((a) => a.status === 'ACTIVE');
    const pending = list.some((a) => PENDING.has(a.status));
    const connected = active || (found?.noAuth ?? false);
    services[slug] = {
      connected,
      pending,
      status: connected ? 'ACTIVE' : (list[0]?.status ?? 'NOT_CONNECTED'),
      accounts: list.map(({ id, alias, status }) => ({ id, ...(alias ? { alias } : {}), status })),
    };
  }
  return services;
}
