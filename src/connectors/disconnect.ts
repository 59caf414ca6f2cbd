import { type ComposioGateway, isComposioNotFound } from '../composio/index.js';
import type { Db } from '../db/database.js';
import type { Installation } from '../installations/installations.js';
import { listAccounts } from './inventory.js';
import { withSession } from './session.js';

/**
 * Revokes and deletes one account — only after proving it belongs to this installation's
 * Composio user (found in that user's list) and to this app. Anything else (unknown id, someone
 * else's) removes nothing.
 */
export async function disconnectAccount(
  composio: ComposioGateway,
  installation: Pick<Installation, 'composioUserId'>,
  toolkit: string,
  accountId: string,
): Promise<{ removed: 0 | 1 }> {
  const account = await composio.findConnectedAccount(installation.composioUserId, accountId);
  if (!account || account.toolkit !== toolkit) return { removed: 0 };
  try {
    await composio.deleteConnectedAccount(account.id, { revoke: true });
  } catch (error) {
    if (isComposioNotFound(error)) return { removed: 0 };
    throw error;
  }
  return { removed: 1 };
}

/** Disconnects the account the Session has selected for an app (the first version's route). */
export async function disconnectSelected(
  db: Db,
  composio: ComposioGateway,
  installation: Pick<Installation, 'id' | 'composioUserId'>,
  toolkit: string,
): Promise<{ removed: 0 | 1 }> {
  const page = await withSession(db, composio, installation, (session) =>
    composio.listSessionToolkits(session.sessionId, { limit: 1, toolkits: [toolkit] }),
  );
  const selected = page.items.find((t) => t.slug === toolkit)?.connectedAccount;
  if (!selected) return { removed: 0 };
  return disconnectAccount(composio, installation, toolkit, selected.id);
}

/**
 * When an installation is removed: revoke and delete every connected account of its user (the
 * list filtered by that user is the proof they are its). Stops at the first failure other than
 * "already gone", so the removal can be retried.
 */
export async function revokeAllAccounts(composio: ComposioGateway, composioUserId: string): Promise<number> {
  const accounts = await listAccounts(composio, composioUserId);
  let removed = 0;
  for (const account of accounts) {
    try {
      await composio.deleteConnectedAccount(account.id, { revoke: true });
      removed += 1;
    } catch (error) {
      if (!isComposioNotFound(error)) throw error;
    }
  }
  return removed;
}
