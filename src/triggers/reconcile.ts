import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import {
  type ComposioGateway,
  isComposioFailure,
  isComposioNotFound,
  runAsCaller,
  type TriggerInstance,
  type TriggerType,
} from '../composio/index.js';
import type { Db, Sql } from '../db/database.js';
import { foundDisabledEventId } from '../events/broker-events.js';
import { ingestTriggerDisabled } from '../events/intake/ingest.js';
import type { EventNotifier } from '../events/queue/notifier.js';
import { composioUserIdFor } from '../installations/tokens.js';
import { composioTriggerConfig } from './composio-config.js';
import {
  allTriggerRows,
  clearComposioStop,
  findTriggerByComposioId,
  forgetOrphan,
  forgetOrphansExcept,
  moveTriggerRow,
  noteOrphans,
} from './store.js';
import type { TriggerRow } from './view.js';

/**
 * The broker's triggers held against Composio's, so that none stays `active` in our answers
 * while no event will ever come, and Composio keeps no trigger nobody owns:
 * - a trigger Composio lost (deleted on the dashboard, gone with a restore on Composio's side) is
 *   made again on its account, and the row points at the new Composio trigger: the app's id,
 *   automation, filter and counters stay;
 * - one Composio disabled without the broker hearing of it (a `composio.trigger.disabled` that
 *   never arrived) is shown stopped and announced with a `trigger.disabled` event; one the app
 *   paused but Composio runs is paused there again; one shown stopped that Composio runs again is
 *   shown running;
 * - one on Composio that no installation's trigger holds is deleted there once it stayed unowned
 *   for `graceMs` (a day by default): after a database restore the rows may come back, and a
 *   create in progress holds its Composio trigger a moment before its row exists.
 *
 * One sweep lists every Composio trigger, 50 a page (the most Composio answers), and nothing is
 * repaired unless the sweep got to the end. The calls go at most at `RECONCILE_SHARE` of the
 * project's Composio budget, as a flow of their own in the fair queue, so the sweep never takes
 * what requests need: at the default 600 calls a minute that is a page every second, so 100,000
 * triggers (2,000 pages) take about 33 minutes; a lost trigger costs one call more to confirm it,
 * then three to make it again (type, upsert, and a pause if it was paused).
 */

/** Any fixed number: the lock that lets one broker process at a time reconcile. */
export const RECONCILE_LOCK = 7_262_011_005;
/** The most Composio lists per page (composio-api.md §10 row 1). */
const PAGE_SIZE = 50;
/** The part of the project's Composio budget a sweep may use. */
const RECONCILE_SHARE = 0.1;
/** How long an unowned Composio trigger is left alone before it is deleted. */
const ORPHAN_GRACE_MS = 24 * 3_600_000;
/** The reason shown for a trigger found disabled: Composio's list does not say why. */
const FOUND_DISABLED_REASON = 'disabled_on_composio';
/** The reason shown for a trigger Composio lost and would not make again (its account is gone). */
const LOST_REASON = 'lost_on_composio';
const FLOW = 'trigger-reconcile';

/** What one sweep repaired, each counted in metrics (`omb_trigger_repairs_total{kind}`) and logged. */
type RepairKind =
  /** Composio had lost it: made again. */
  | 'remade'
  /** Composio had stopped it unannounced: shown and announced. */
  | 'found_disabled'
  /** Paused by the app, running on Composio: paused there again. */
  | 'repaused'
  /** Shown stopped by Composio, running there again: shown running. */
  | 'revived'
  /** On Composio, unowned for the whole grace period: deleted there. */
  | 'orphan_deleted'
  /** A repair that failed (Composio refused or was down); tried again on the next sweep. */
  | 'failed';

export interface ReconcileDeps {
  readonly db: Db;
  readonly sql: Sql;
  /** Where the run's session advisory lock is held: Postgres itself (`Database.sessions`); `sql` when not given. */
  readonly sessions?: Sql;
  readonly composio: ComposioGateway;
  readonly log: Pick<Logger, 'info' | 'warn'>;
  /** The project's Composio budget (`COMPOSIO_CALLS_PER_MINUTE`): the sweep takes `RECONCILE_SHARE` of it. */
  readonly callsPerMinute: number;
  /** Bound on each call, as for requests (`COMPOSIO_TIMEOUT_MS`). */
  readonly timeoutMs: number;
  readonly graceMs?: number;
  /** Told of a `trigger.disabled` queued: wakes the installation's polls here and counts it (every process hears the append's own announcement). */
  readonly notifier?: Pick<EventNotifier, 'queued'>;
  readonly onRepair?: (kind: RepairKind) => void;
}

export interface ReconcileRun {
  /** False when another process held the lock, or the sweep could not finish; nothing was repaired then. */
  readonly ran: boolean;
  /** Composio triggers seen. */
  readonly seen: number;
  readonly repairs: Readonly<Record<RepairKind, number>>;
}

const noRepairs = (): Record<RepairKind, number> => ({
  remade: 0,
  found_disabled: 0,
  repaused: 0,
  revived: 0,
  orphan_deleted: 0,
  failed: 0,
});

/** One sweep, in one process at a time (a session advisory lock on a connection held for the run). */
export async function reconcileTriggers(deps: ReconcileDeps, options: { now: Date }): Promise<ReconcileRun> {
  const connection = await (deps.sessions ?? deps.sql).reserve();
  try {
    const [lock] = await connection<{ locked: boolean }[]>`select pg_try_advisory_lock(${RECONCILE_LOCK}) as locked`;
    if (!lock?.locked) return { ran: false, seen: 0, repairs: noRepairs() };
    try {
      return await sweep(deps, options.now);
    } finally {
      await connection`select pg_advisory_unlock(${RECONCILE_LOCK})`;
    }
  } finally {
    connection.release();
  }
}

/** Calls at the sweep's share of the budget: each waits until its turn, as a flow of its own. */
function pacedCalls(deps: ReconcileDeps) {
  const gapMs = 60_000 / Math.max(1e-9, deps.callsPerMinute * RECONCILE_SHARE);
  let nextAt = 0;
  return async <T>(cost: number, fn: () => Promise<T>): Promise<T> => {
    const wait = nextAt - performance.now();
    if (wait > 0) await sleep(wait);
    nextAt = performance.now() + gapMs * cost;
    return runAsCaller({ flow: FLOW, deadlineAt: performance.now() + deps.timeoutMs }, fn);
  };
}

async function sweep(deps: ReconcileDeps, now: Date): Promise<ReconcileRun> {
  const paced = pacedCalls(deps);
  const repairs = noRepairs();
  const repaired = (kind: RepairKind, detail: Record<string, unknown>, message: string) => {
    repairs[kind] += 1;
    deps.onRepair?.(kind);
    if (kind === 'failed') deps.log.warn(detail, message);
    else deps.log.info({ ...detail, repair: kind }, message);
  };

  // Rows made after this moment may hold Composio triggers the sweep did not see: left for the next one.
  const startedAt = new Date();
  const onComposio = new Map<string, TriggerInstance>();
  try {
    let cursor: string | undefined;
    do {
      const page = await paced(1, () => deps.composio.listActiveTriggers({ limit: PAGE_SIZE, ...(cursor ? { cursor } : {}) }));
      for (const instance of page.items) onComposio.set(instance.id, instance);
      cursor = page.nextCursor ?? undefined;
    } while (cursor);
  } catch (err) {
    deps.log.warn({ err, seen: onComposio.size }, 'trigger reconciliation stopped: Composio could not be listed to the end');
    return { ran: false, seen: onComposio.size, repairs };
  }

  const rows = await allTriggerRows(deps.db);
  const owned = new Set(rows.map((r) => r.composioTriggerId));
  const types = new Map<string, Promise<TriggerType>>();
  for (const row of rows) {
    const instance = onComposio.get(row.composioTriggerId);
    try {
      if (!instance) {
        if (row.createdAt < startedAt && row.needsReconnectAt === null) await remakeIfLost(deps, paced, types, row, repaired);
      } else await settleState(deps, paced, row, instance, repaired);
    } catch (err) {
      repaired(
        'failed',
        { err, installationId: row.installationId, triggerId: row.id, composioTriggerId: row.composioTriggerId },
        'could not reconcile a trigger with Composio',
      );
    }
  }

  await settleOrphans(
    deps,
    paced,
    [...onComposio.keys()].filter((id) => !owned.has(id)),
    now,
    repaired,
  );
  const done: ReconcileRun = { ran: true, seen: onComposio.size, repairs };
  deps.log.info({ seen: done.seen, triggers: rows.length, repairs }, 'triggers reconciled with Composio');
  return done;
}

type Paced = ReturnType<typeof pacedCalls>;
type Repaired = (kind: RepairKind, detail: Record<string, unknown>, message: string) => void;

/**
 * Not in the sweep: asked once more by id (a page boundary shifting under a sweep may skip one),
 * and made again on its account only if Composio really has no such trigger. The row keeps its
 * id, automation, filter, config and counters, and points at the new Composio trigger; a paused
 * one is paused there too.
 */
async function remakeIfLost(
  deps: ReconcileDeps,
  paced: Paced,
  types: Map<string, Promise<TriggerType>>,
  row: TriggerRow,
  repaired: Repaired,
) {
  const found = await paced(1, () => deps.composio.listActiveTriggers({ limit: 1, triggerIds: [row.composioTriggerId] }));
  if (found.items.some((t) => t.id === row.composioTriggerId)) return;
  let type = types.get(row.triggerSlug);
  if (!type) {
    type = paced(1, () => deps.composio.getTriggerType(row.triggerSlug));
    types.set(row.triggerSlug, type);
  }
  const config = composioTriggerConfig(await type, {
    toolkit: row.toolkit,
    filter: row.filter as Record<string, string>,
    config: row.config as Record<string, unknown>,
  });
  let triggerId: string;
  try {
    ({ triggerId } = await paced(1, () =>
      deps.composio.upsertTrigger({
        userId: composioUserIdFor(row.installationId),
        slug: row.triggerSlug,
        connectedAccountId: row.connectedAccountId,
        config,
      }),
    ));
  } catch (error) {
    // Composio will not make it again (its account is gone or not usable): shown and announced
    // rather than left `active`; the next sweeps try again, and a remake clears the stop.
    if (!isComposioFailure(error) || (!isComposioNotFound(error) && error.kind !== 'refused')) throw error;
    await announceStop(deps, row, LOST_REASON, 'lost');
    repaired(
      'failed',
      { installationId: row.installationId, triggerId: row.id, composioTriggerId: row.composioTriggerId, code: error.code },
      'lost trigger could not be made again; shown stopped',
    );
    return;
  }
  const holder = await findTriggerByComposioId(deps.db, triggerId);
  if (holder && holder.id !== row.id) {
    // Composio answered a trigger another automation holds (same account and config): leave both.
    if (!holder.enabled) await paced(1, () => deps.composio.setTriggerEnabled(triggerId, false));
    repaired(
      'failed',
      { installationId: row.installationId, triggerId: row.id, composioTriggerId: triggerId },
      'lost trigger not made again: another automation holds its twin',
    );
    return;
  }
  if (!row.enabled) await paced(1, () => deps.composio.setTriggerEnabled(triggerId, false));
  const moved = await moveTriggerRow(deps.db, row, {
    connectedAccountId: row.connectedAccountId,
    composioTriggerId: triggerId,
    accountAlias: row.accountAlias,
  });
  if (!moved) {
    // The row changed meanwhile (moved, deleted): the new Composio trigger is nobody's.
    await deleteQuietly(deps, paced, triggerId);
    return;
  }
  repaired(
    'remade',
    {
      installationId: row.installationId,
      triggerId: row.id,
      composioTriggerId: triggerId,
      previousComposioTriggerId: row.composioTriggerId,
    },
    'trigger Composio had lost made again',
  );
}

/**
 * Marks the trigger stopped and queues its `trigger.disabled`, as the webhook would have
 * (omb_ingest_trigger_disabled), under an id of the broker's own, one per Composio trigger and
 * `stop`: announcing the same stop again is a duplicate. True when it was announced now.
 */
async function announceStop(deps: ReconcileDeps, row: TriggerRow, reason: string, stop: string): Promise<boolean> {
  const result = await ingestTriggerDisabled(deps.sql, {
    eventId: foundDisabledEventId(row.composioTriggerId, stop),
    composioTriggerId: row.composioTriggerId,
    reason,
    receivedAt: new Date(),
  });
  if (result.queued && result.installationId) deps.notifier?.queued(result.installationId, 'trigger.disabled');
  return result.outcome === 'accepted';
}

/** Composio's on/off state against what the row says. */
async function settleState(deps: ReconcileDeps, paced: Paced, row: TriggerRow, instance: TriggerInstance, repaired: Repaired) {
  if (row.needsReconnectAt !== null) return;
  const detail = { installationId: row.installationId, triggerId: row.id, composioTriggerId: row.composioTriggerId };
  if (!instance.enabled && row.enabled && row.composioDisabledAt === null) {
    const announced = await announceStop(deps, row, FOUND_DISABLED_REASON, instance.updatedAt ?? 'unknown');
    if (announced) repaired('found_disabled', detail, 'trigger Composio had stopped unannounced shown and announced');
    return;
  }
  if (instance.enabled && !row.enabled) {
    await paced(1, () => deps.composio.setTriggerEnabled(row.composioTriggerId, false));
    repaired('repaused', detail, 'paused trigger running on Composio paused there again');
    return;
  }
  if (instance.enabled && row.composioDisabledAt !== null) {
    await clearComposioStop(deps.db, row);
    repaired('revived', detail, 'trigger Composio runs again shown running');
  }
}

/**
 * Composio triggers no row holds: noted when first seen so, deleted once unowned for the grace
 * period (asked of the database once more first: a create may have stored its row meanwhile).
 */
async function settleOrphans(deps: ReconcileDeps, paced: Paced, unowned: string[], now: Date, repaired: Repaired) {
  const seenBefore = new Date(now.getTime() - (deps.graceMs ?? ORPHAN_GRACE_MS));
  await forgetOrphansExcept(deps.db, new Set(unowned));
  const due: string[] = [];
  for (let at = 0; at < unowned.length; at += 1000)
    due.push(...(await noteOrphans(deps.db, unowned.slice(at, at + 1000), now, seenBefore)));
  for (const composioTriggerId of due) {
    if (await findTriggerByComposioId(deps.db, composioTriggerId)) {
      await forgetOrphan(deps.db, composioTriggerId);
      continue;
    }
    try {
      await deleteOnComposio(deps, paced, composioTriggerId);
      await forgetOrphan(deps.db, composioTriggerId);
      repaired('orphan_deleted', { composioTriggerId }, 'Composio trigger no installation owns deleted');
    } catch (err) {
      repaired('failed', { err, composioTriggerId }, 'could not delete a Composio trigger no installation owns');
    }
  }
}

/** Gone already counts as deleted (404 here; 409 and 410 in the gateway). */
async function deleteOnComposio(deps: ReconcileDeps, paced: Paced, composioTriggerId: string): Promise<void> {
  try {
    await paced(1, () => deps.composio.deleteTrigger(composioTriggerId));
  } catch (error) {
    if (!isComposioNotFound(error)) throw error;
  }
}

async function deleteQuietly(deps: ReconcileDeps, paced: Paced, composioTriggerId: string): Promise<void> {
  try {
    await deleteOnComposio(deps, paced, composioTriggerId);
  } catch (error) {
    deps.log.warn(
      { composioTriggerId, code: isComposioFailure(error) ? error.code : 'unknown' },
      'could not delete a Composio trigger made for a row that changed meanwhile',
    );
  }
}
