import type { ComposioGateway, ConnectedAccount, ConnectedAccountStatus, Page, SessionToolkit } from '../composio/index.js';
import { isComposioFailure } from '../composio/index.js';
import type { Db } from '../db/database.js';
import type { Installation } from '../installations/installations.js';
import { withSession } from './session.js';

/** One account as the client sees it: id, label and lifecycle status, nothing else. */
interface AccountView {
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

/** What Composio lists per page; the most it gives (composio-api.md §10 row 1). */
const PAGE_SIZE = 50;
/** A runaway cursor must not cost more than this many calls per sweep. */
const MAX_PAGES = 20;
const PENDING: ReadonlySet<string> = new Set(['INITIALIZING', 'INITIATED', 'PENDING']);

/** Follows `nextCursor` to the end, at most `MAX_PAGES` pages; a repeated cursor ends the sweep. */
async function sweep<T>(fetchPage: (cursor: string | undefined) => Promise<Page<T>>): Promise<T[]> {
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

/**
 * Every connected account of the installation's Composio user (optionally for some toolkits).
 * The list is asked for that user alone (`user_ids`): that filter is what makes them theirs.
 */
export function listAccounts(composio: ComposioGateway, userId: string, toolkits?: readonly string[]): Promise<ConnectedAccount[]> {
  return sweep((cursor) =>
    composio.listConnectedAccounts({ userId, cursor, limit: PAGE_SIZE, ...(toolkits ? { toolkitSlugs: toolkits } : {}) }),
  );
}

/** Which toolkits need no sign-in: the shared toolkit catalog (`CatalogCache`) knows. */
export interface NoAuthToolkits {
  noAuthToolkits(): Promise<ReadonlySet<string>>;
}

/**
 * The installation's whole multi-account inventory, in a few calls however large the catalog:
 * - every connected account of the user (one list, filtered by the user, 50 a page);
 * - the Session's toolkits that have a connected account (`is_connected`), for the account
 *   the Session has selected — not all of the Session's toolkits (1,000+, 20 pages and more);
 * - the apps that need no sign-in, from the shared catalog (cached for every installation).
 * Asked for some apps (`only`), the Session's view of just those says which need no sign-in.
 * When the project key may not list accounts, the Session's view alone.
 */
export async function inventory(
  db: Db,
  composio: ComposioGateway,
  catalog: NoAuthToolkits,
  installation: Pick<Installation, 'id' | 'composioUserId'>,
  only?: readonly string[],
): Promise<Record<string, ServiceView>> {
  const sessionView = withSession(db, composio, installation, (session) =>
    sweep<SessionToolkit>((cursor) =>
      composio.listSessionToolkits(session.sessionId, {
        cursor,
        limit: PAGE_SIZE,
        ...(only ? { toolkits: only } : { isConnected: true }),
      }),
    ),
  );
  const accountList = listAccounts(composio, installation.composioUserId, only).catch((error: unknown) => {
    if (!isComposioFailure(error, 'refused', 'forbidden')) throw error;
    return [] as ConnectedAccount[];
  });
  const noAuth = only ? Promise.resolve(new Set<string>()) : catalog.noAuthToolkits();
  // All three settle before a failure is thrown, so none is left running unobserved.
  const [toolkits, accounts, noAuthSlugs] = await Promise.allSettled([sessionView, accountList, noAuth]);
  return mergeInventory(settledValue(toolkits), settledValue(accounts), settledValue(noAuthSlugs), only);
}

function settledValue<T>(result: PromiseSettledResult<T>): T {
  if (result.status === 'rejected') throw result.reason;
  return result.value;
}

/**
 * The accounts, the Session's toolkits and the no-auth apps, as one view per app. The accounts
 * are the ones Composio listed for the installation's user (the `user_ids` filter); nothing here
 * reads an owner from the answer (`user_id` is deprecated and may be absent).
 */
export function mergeInventory(
  toolkits: readonly SessionToolkit[],
  accounts: readonly ConnectedAccount[],
  noAuth: ReadonlySet<string>,
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
  for (const slug of noAuth) entry(slug).noAuth = true;
  for (const account of accounts) {
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
