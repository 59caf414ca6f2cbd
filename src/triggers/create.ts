import { randomUUID } from 'node:crypto';
import type { BaseLogger } from 'pino';
import {
  type ComposioGateway,
  type ConnectedAccount,
  isComposioFailure,
  isComposioNotFound,
  reconnectMessage,
  type TriggerType,
} from '../composio/index.js';
import type { Db } from '../db/database.js';
import { AppError, badRequest, conflict, notFound } from '../errors.js';
import { checkedComposioTriggerConfig } from './composio-config.js';
import { duplicateTrigger } from './errors.js';
import type { CreateTriggerInput } from './input.js';
import {
  accountLabel,
  countAccountTriggers,
  findTriggerByAutomation,
  findTriggerByComposioId,
  insertTriggerWithinCap,
  selectTriggerViews,
  violatedUniqueConstraint,
} from './store.js';
import type { TriggerTypeCache } from './types.js';
import { type TriggerRow, type TriggerView, toTriggerView } from './view.js';

/**
 * Triggers one connected account may carry. Each polled trigger costs Composio a poll every
 * 15 minutes; ten per account covers any real set of automations.
 */
export const MAX_TRIGGERS_PER_ACCOUNT = 10;

export interface TriggerDeps {
  readonly db: Db;
  readonly composio: ComposioGateway;
  /** Trigger types, cached per toolkit: a create asks Composio only for the account and the upsert. */
  readonly types: TriggerTypeCache;
  readonly log: Pick<BaseLogger, 'info' | 'warn'>;
}

/** The installation asking, as the trigger operations need it. */
export interface TriggerOwner {
  readonly id: string;
  readonly composioUserId: string;
}

export interface CreateTriggerResult {
  readonly trigger: TriggerView;
  /** False when the automation already had this very trigger (answered 200, nothing changed). */
  readonly created: boolean;
}

/**
 * Creates an automation's trigger: on Composio first, then here. The same request again returns
 * the stored trigger without calling Composio; another definition for the same automation is a
 * conflict. A Composio trigger the broker ends up not keeping is deleted again, so Composio is
 * never left with triggers nobody owns.
 */
export async function createTrigger(
  deps: TriggerDeps,
  owner: TriggerOwner,
  input: CreateTriggerInput,
  day: string,
): Promise<CreateTriggerResult> {
  const { db, composio } = deps;
  const existing = await findTriggerByAutomation(db, owner.id, input.automationId);
  if (existing) return repeatOf(deps, owner, existing, input, day);
  // Before Composio is asked anything. Creates racing may all pass here: the insert decides,
  // counting again under the account's lock, and whoever finds the account full gives back what
  // it made on Composio.
  await refuseFullAccount(db, owner.id, input.connectedAccountId);

  // Both lookups only read; the account's answer decides first, so a foreign account is a 404
  // whatever the trigger type.
  const [account, type] = await Promise.allSettled([ownedAccount(composio, owner, input), triggerTypeFor(deps, input)]);
  if (account.status === 'rejected') throw account.reason;
  if (type.status === 'rejected') throw type.reason;
  // Held against the type's config schema: what Composio would refuse (or accept wrongly) is a
  // 400 naming the field, and Composio is not asked.
  const config = checkedComposioTriggerConfig(type.value, input);

  const { triggerId } = await composio.upsertTrigger({
    userId: owner.composioUserId,
    slug: input.triggerSlug,
    connectedAccountId: account.value.id,
    config,
  });
  // Composio's upsert answers an existing trigger with the same account and configuration (and
  // re-enables it): a concurrent identical request, or another automation watching the same thing.
  if (await findTriggerByComposioId(db, triggerId)) return settleWithHolder(deps, owner, input, triggerId, true, day);

  if (!input.enabled) {
    try {
      await composio.setTriggerEnabled(triggerId, false);
    } catch (error) {
      await discardComposioTrigger(deps, triggerId);
      throw error;
    }
  }

  let row: TriggerRow | 'full';
  try {
    row = await insertTriggerWithinCap(
      db,
      {
        id: randomUUID(),
        installationId: owner.id,
        automationId: input.automationId,
        toolkit: input.toolkit,
        triggerSlug: input.triggerSlug,
        connectedAccountId: account.value.id,
        accountAlias: accountLabel(account.value.alias),
        composioTriggerId: triggerId,
        filter: input.filter,
        config: input.config,
        enabled: input.enabled,
      },
      MAX_TRIGGERS_PER_ACCOUNT,
    );
  } catch (error) {
    if (violatedUniqueConstraint(error) !== null) return settleWithHolder(deps, owner, input, triggerId, input.enabled, day);
    await discardComposioTrigger(deps, triggerId);
    throw error;
  }
  if (row === 'full') return settleFullAccount(deps, owner, input, triggerId, day);
  deps.log.info(
    { installationId: owner.id, triggerId: row.id, composioTriggerId: triggerId, triggerSlug: row.triggerSlug },
    'trigger created',
  );
  return { trigger: toTriggerView(row, null), created: true };
}

/** The automation already has a trigger: the same one is answered as it is, another is a conflict. */
async function repeatOf(
  deps: TriggerDeps,
  owner: TriggerOwner,
  existing: TriggerRow,
  input: CreateTriggerInput,
  day: string,
): Promise<CreateTriggerResult> {
  if (!sameDefinition(existing, input)) {
    if (existing.needsReconnectAt !== null) {
      throw conflict(
        `automation ${input.automationId}'s trigger lost its account; reconnect the account under the same label and it comes back by itself, or PATCH it with the new connectedAccountId`,
        'automation_conflict',
      );
    }
    throw conflict(
      `automation ${input.automationId} already has a different trigger; delete it to replace it, or PATCH it to pause or resume it`,
      'automation_conflict',
    );
  }
  const [trigger] = await selectTriggerViews(deps.db, owner.id, day, existing.id);
  return { trigger: trigger ?? toTriggerView(existing, null), created: false };
}

/**
 * Another row holds the Composio trigger this request got, or took this automation first (two
 * requests raced). The Composio trigger is put back the way its holder wants it, or deleted when
 * no row holds it, and the request is answered against the automation's row if there is one.
 * `composioEnabled` is how this request left the trigger on Composio.
 */
async function settleWithHolder(
  deps: TriggerDeps,
  owner: TriggerOwner,
  input: CreateTriggerInput,
  triggerId: string,
  composioEnabled: boolean,
  day: string,
): Promise<CreateTriggerResult> {
  const holder = await giveBackComposioTrigger(deps, triggerId, composioEnabled);
  const winner = await findTriggerByAutomation(deps.db, owner.id, input.automationId);
  if (winner) return repeatOf(deps, owner, winner, input, day);
  if (!holder) {
    // The row this request collided with was deleted meanwhile: a retry starts clean.
    throw conflict('this trigger was changed by another request at the same time; try again', 'concurrent_change');
  }
  // Composio keeps one trigger per account and configuration, and the broker one automation per trigger.
  const which = holder.installationId === owner.id ? `automation ${holder.automationId}` : 'another automation';
  throw duplicateTrigger(which, input.toolkit, 'this account');
}

/**
 * The account filled up while this request was at Composio (creates raced). Its Composio trigger
 * goes back the way `settleWithHolder` puts it back; a twin of this very request that took the
 * automation meanwhile makes this one a repeat, else the answer is `too_many_triggers`.
 */
async function settleFullAccount(
  deps: TriggerDeps,
  owner: TriggerOwner,
  input: CreateTriggerInput,
  triggerId: string,
  day: string,
): Promise<CreateTriggerResult> {
  await giveBackComposioTrigger(deps, triggerId, input.enabled);
  const winner = await findTriggerByAutomation(deps.db, owner.id, input.automationId);
  if (winner) return repeatOf(deps, owner, winner, input, day);
  throw fullAccount(input.connectedAccountId);
}

/**
 * A Composio trigger this request got but will not store: deleted when no row holds it, else put
 * back on or off as its holder wants (`composioEnabled` is how this request left it). Answers
 * the holder, if there is one.
 */
async function giveBackComposioTrigger(deps: TriggerDeps, triggerId: string, composioEnabled: boolean): Promise<TriggerRow | undefined> {
  const holder = await findTriggerByComposioId(deps.db, triggerId);
  if (!holder) await discardComposioTrigger(deps, triggerId);
  else if (holder.enabled !== composioEnabled) await deps.composio.setTriggerEnabled(triggerId, holder.enabled);
  return holder;
}

/** `409 too_many_triggers` when the account already carries the most triggers one may have. */
export async function refuseFullAccount(db: Db, installationId: string, connectedAccountId: string): Promise<void> {
  if ((await countAccountTriggers(db, installationId, connectedAccountId)) >= MAX_TRIGGERS_PER_ACCOUNT) {
    throw fullAccount(connectedAccountId);
  }
}

/** The one refusal of a full account, early or at the insert, for a create or a move. */
export const fullAccount = (connectedAccountId: string) =>
  conflict(
    `connected account ${connectedAccountId} already has ${MAX_TRIGGERS_PER_ACCOUNT} triggers, the most one account may have; delete one first`,
    'too_many_triggers',
  );

/**
 * The connected account, if it is this installation's, of the trigger's app and `ACTIVE` (create,
 * and a move with `PATCH`).
 */
export async function ownedAccount(
  composio: ComposioGateway,
  owner: TriggerOwner,
  input: { readonly connectedAccountId: string; readonly toolkit: string },
): Promise<ConnectedAccount> {
  const missing = () =>
    notFound(`connected account ${input.connectedAccountId} is not one of this installation's accounts`, 'connected_account_not_found');
  // Looked up among the installation's own Composio user's accounts (the list's filter is the
  // proof): another user's account is not found, exactly like a missing one.
  const account = await composio.findConnectedAccount(owner.composioUserId, input.connectedAccountId);
  if (!account) throw missing();
  if (account.toolkit.toLowerCase() !== input.toolkit) {
    throw badRequest(`body.connectedAccountId: the account is a ${account.toolkit} account, not ${input.toolkit}`, 'toolkit_mismatch');
  }
  if (account.status !== 'ACTIVE') throw conflict(reconnectMessage(input.toolkit), 'reconnect_required');
  return account;
}

/**
 * The trigger type, from the toolkit's cached list. Only a slug the toolkit does not have is
 * looked up on its own, to tell a type of another app (`toolkit_mismatch`) from no type at all.
 */
async function triggerTypeFor(deps: TriggerDeps, input: CreateTriggerInput): Promise<TriggerType> {
  const cached = await deps.types.find(input.toolkit, input.triggerSlug);
  if (cached) return cached;
  let type: TriggerType;
  try {
    type = await deps.composio.getTriggerType(input.triggerSlug);
  } catch (error) {
    if (isComposioNotFound(error)) throw notFound(`there is no trigger type ${input.triggerSlug}`, 'trigger_type_not_found');
    throw error;
  }
  if (type.toolkit.toLowerCase() !== input.toolkit) {
    throw badRequest(`body.triggerSlug: ${input.triggerSlug} is a ${type.toolkit} trigger, not ${input.toolkit}`, 'toolkit_mismatch');
  }
  return type;
}

/** Removes a Composio trigger this request made but the broker will not keep; best effort. */
async function discardComposioTrigger(deps: TriggerDeps, triggerId: string): Promise<void> {
  try {
    await deps.composio.deleteTrigger(triggerId);
  } catch (error) {
    if (isComposioNotFound(error)) return;
    // The request fails with its own error; this one only leaves an orphan for the operators.
    deps.log.warn(
      { composioTriggerId: triggerId, code: isComposioFailure(error) || error instanceof AppError ? error.code : 'unknown' },
      'could not delete an unkept Composio trigger',
    );
  }
}

/** The body as stored: same app, trigger, account, filter, config and on/off state. */
function sameDefinition(row: TriggerRow, input: CreateTriggerInput): boolean {
  return (
    row.toolkit === input.toolkit &&
    row.triggerSlug === input.triggerSlug &&
    row.connectedAccountId === input.connectedAccountId &&
    row.enabled === input.enabled &&
    canonicalJson(row.filter) === canonicalJson(input.filter) &&
    canonicalJson(row.config) === canonicalJson(input.config)
  );
}

/** JSON with object keys sorted: `jsonb` does not keep the order a client sent. */
function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v !== null && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v,
  );
}
