import type { ConnectedAccount } from '../composio/index.js';
import { isComposioNotFound } from '../composio/index.js';
import { conflict } from '../errors.js';
import { composioTriggerConfig } from './composio-config.js';
import { fullAccount, MAX_TRIGGERS_PER_ACCOUNT, ownedAccount, refuseFullAccount, type TriggerDeps, type TriggerOwner } from './create.js';
import { duplicateTrigger, triggerNotFound } from './errors.js';
import { getTrigger } from './list.js';
import { accountLabel, findTrigger, findTriggerByComposioId, moveTriggerRow, moveTriggerRowWithinCap } from './store.js';
import type { TriggerRow, TriggerView } from './view.js';

/**
 * Moving a trigger to another connected account of its installation, keeping everything the
 * client knows it by (id, automation, filter, config, on/off state, today's counters): a
 * Composio trigger is made anew on the account, the row is pointed at it, and the old Composio
 * trigger is deleted. Used when a reconnect under the same label replaced the account (by the
 * background job in ./reconnect-job.ts) and for an explicit `PATCH {connectedAccountId}`.
 */

export type MoveOutcome =
  /** The row now names the new account and its Composio trigger. */
  | { readonly moved: true; readonly row: TriggerRow }
  /** Another automation already holds this very trigger on that account. */
  | { readonly moved: false; readonly reason: 'duplicate' }
  /** The row changed (or was deleted) meanwhile; nothing was kept. */
  | { readonly moved: false; readonly reason: 'changed' }
  /** The account already carries the most triggers asked for (`maxOnAccount`); nothing was kept. */
  | { readonly moved: false; readonly reason: 'full' };

/** A move needs no trigger-type cache: it is rare, and reads the one type it needs. */
type MoveDeps = Pick<TriggerDeps, 'db' | 'composio' | 'log'>;

/**
 * `maxOnAccount`: the most triggers the account may carry once this one is on it, counted under
 * the account's lock as the row moves (an explicit move; the reconnect job brings back what the
 * account had, uncapped).
 */
export async function moveTriggerToAccount(
  deps: MoveDeps,
  owner: TriggerOwner,
  row: TriggerRow,
  account: Pick<ConnectedAccount, 'id' | 'alias'>,
  maxOnAccount?: number,
): Promise<MoveOutcome> {
  const { db, composio } = deps;
  const type = await composio.getTriggerType(row.triggerSlug);
  const { triggerId } = await composio.upsertTrigger({
    userId: owner.composioUserId,
    slug: row.triggerSlug,
    connectedAccountId: account.id,
    config: composioTriggerConfig(type, {
      toolkit: row.toolkit,
      filter: row.filter as Record<string, string>,
      config: row.config as Record<string, unknown>,
    }),
  });
  const sameComposioTrigger = triggerId === row.composioTriggerId;
  const holder = sameComposioTrigger ? undefined : await findTriggerByComposioId(db, triggerId);
  if (holder) {
    // Composio's upsert answered (and re-enabled) a trigger another automation holds: put it back.
    if (!holder.enabled) await composio.setTriggerEnabled(triggerId, false);
    return { moved: false, reason: 'duplicate' };
  }
  // Upsert leaves the trigger enabled; a paused trigger stays paused.
  if (!row.enabled) await composio.setTriggerEnabled(triggerId, false);

  const to = { connectedAccountId: account.id, composioTriggerId: triggerId, accountAlias: accountLabel(account.alias) };
  const moved = maxOnAccount === undefined ? await moveTriggerRow(db, row, to) : await moveTriggerRowWithinCap(db, row, to, maxOnAccount);
  if (moved === undefined || moved === 'full') {
    if (!sameComposioTrigger) await deleteComposioTrigger(deps, triggerId);
    return { moved: false, reason: moved === 'full' ? 'full' : 'changed' };
  }
  if (!sameComposioTrigger) await deleteComposioTrigger(deps, row.composioTriggerId);
  deps.log.info(
    {
      installationId: row.installationId,
      triggerId: row.id,
      composioTriggerId: triggerId,
      previousComposioTriggerId: row.composioTriggerId,
    },
    'trigger moved to a new connected account',
  );
  return { moved: true, row: moved };
}

/** Best effort: an old Composio trigger usually went with its deleted account already. */
async function deleteComposioTrigger(deps: MoveDeps, composioTriggerId: string): Promise<void> {
  try {
    await deps.composio.deleteTrigger(composioTriggerId);
  } catch (error) {
    if (isComposioNotFound(error)) return;
    deps.log.warn({ composioTriggerId }, 'could not delete a replaced Composio trigger');
  }
}

/**
 * `PATCH /v1/triggers/{id}` with `connectedAccountId`: moves the trigger to another of the
 * installation's accounts of the same app, which must be `ACTIVE` (checked with Composio, as on
 * create: another installation's account is not found).
 */
export async function rebindTrigger(
  deps: TriggerDeps,
  owner: TriggerOwner,
  id: string,
  connectedAccountId: string,
  day: string,
): Promise<TriggerView> {
  const row = await findTrigger(deps.db, owner.id, id);
  if (!row) throw triggerNotFound();
  // The per-account cap holds for a move as for a create: checked before Composio is asked
  // anything, and again as the row moves (moves and creates may race).
  if (row.connectedAccountId !== connectedAccountId) await refuseFullAccount(deps.db, owner.id, connectedAccountId);
  const account = await ownedAccount(deps.composio, owner, { connectedAccountId, toolkit: row.toolkit });
  if (row.connectedAccountId === account.id && row.needsReconnectAt === null) return getTrigger(deps.db, owner.id, id, day);

  const outcome = await moveTriggerToAccount(deps, owner, row, account, MAX_TRIGGERS_PER_ACCOUNT);
  if (!outcome.moved && outcome.reason === 'full') throw fullAccount(account.id);
  if (!outcome.moved && outcome.reason === 'duplicate') {
    throw duplicateTrigger('another automation', row.toolkit, 'that account');
  }
  if (!outcome.moved) throw conflict('this trigger was changed by another request at the same time; try again', 'concurrent_change');
  return getTrigger(deps.db, owner.id, id, day);
}
