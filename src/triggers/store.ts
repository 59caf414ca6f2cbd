import { createHash } from 'node:crypto';
import { and, asc, count, eq, inArray, isNotNull, isNull, lte, ne, sql } from 'drizzle-orm';
import { isOwnLabel } from '../connectors/patterns.js';
import type { Db, DbOrTransaction } from '../db/database.js';
import { triggerDailyUsage, triggerOrphans, triggers } from '../db/schema.js';
import { type TriggerRow, type TriggerView, toTriggerView } from './view.js';

/**
 * The label a trigger remembers of its account, to come back after a reconnect: the person's own
 * label, or '' for an account with none (or one the broker made up for a retry).
 */
export const accountLabel = (alias: string | null | undefined): string => (isOwnLabel(alias) ? alias.trim() : '');

/**
 * The `triggers` table. Every read and write that a client's request can reach is filtered by
 * the installation, so one installation's ids never touch another's rows.
 */

export type NewTriggerRow = typeof triggers.$inferInsert;

export async function findTrigger(db: Db, installationId: string, id: string): Promise<TriggerRow | undefined> {
  const [row] = await db
    .select()
    .from(triggers)
    .where(and(eq(triggers.installationId, installationId), eq(triggers.id, id)));
  return row;
}

export async function findTriggerByAutomation(db: Db, installationId: string, automationId: string): Promise<TriggerRow | undefined> {
  const [row] = await db
    .select()
    .from(triggers)
    .where(and(eq(triggers.installationId, installationId), eq(triggers.automationId, automationId)));
  return row;
}

/** Which row, of any installation, holds a Composio trigger (ids are unique across the service). */
export async function findTriggerByComposioId(db: Db, composioTriggerId: string): Promise<TriggerRow | undefined> {
  const [row] = await db.select().from(triggers).where(eq(triggers.composioTriggerId, composioTriggerId));
  return row;
}

export async function listInstallationTriggers(db: Db, installationId: string): Promise<TriggerRow[]> {
  return db.select().from(triggers).where(eq(triggers.installationId, installationId)).orderBy(asc(triggers.createdAt), asc(triggers.id));
}

/** How many triggers the installation has on one of its connected accounts (leaving one out, if named). */
export async function countAccountTriggers(
  db: DbOrTransaction,
  installationId: string,
  connectedAccountId: string,
  exceptId?: string,
): Promise<number> {
  const onAccount = and(eq(triggers.installationId, installationId), eq(triggers.connectedAccountId, connectedAccountId));
  const [row] = await db
    .select({ n: count() })
    .from(triggers)
    .where(exceptId === undefined ? onAccount : and(onAccount, ne(triggers.id, exceptId)));
  return row?.n ?? 0;
}

/**
 * Advisory locks keyed by two int4 values live apart from the single-bigint ones the jobs and
 * migrations take: this first key says "the triggers of one connected account", the second names
 * the account.
 */
const ACCOUNT_TRIGGERS_LOCK = 7_262_011;

/**
 * Holds, until the transaction ends, the right to add a trigger to one installation's connected
 * account, in whichever process asks. Taken before counting, so the count sees every row the last
 * holder added: two hashes colliding only make two accounts wait for each other.
 */
async function lockAccountTriggers(tx: DbOrTransaction, installationId: string, connectedAccountId: string): Promise<void> {
  const account = createHash('sha256').update(`${installationId} ${connectedAccountId}`).digest().readInt32BE(0);
  await tx.execute(sql`select pg_advisory_xact_lock(${ACCOUNT_TRIGGERS_LOCK}::int4, ${account}::int4)`);
}

/**
 * Inserts the trigger unless its account already carries `max` triggers: `'full'` then, and
 * nothing is written. Count and insert share one short transaction under the account's lock, so
 * creates racing in any number of processes never put more than `max` on one account.
 */
export async function insertTriggerWithinCap(db: Db, row: NewTriggerRow, max: number): Promise<TriggerRow | 'full'> {
  return db.transaction(async (tx) => {
    await lockAccountTriggers(tx, row.installationId, row.connectedAccountId);
    if ((await countAccountTriggers(tx, row.installationId, row.connectedAccountId)) >= max) return 'full';
    const [inserted] = await tx.insert(triggers).values(row).returning();
    if (!inserted) throw new Error('inserting a trigger returned no row');
    return inserted;
  });
}

/**
 * Triggers of every installation that deliver events: enabled, not waiting for their account to
 * be reconnected, and not stopped by Composio.
 */
export async function countActiveTriggers(db: Db): Promise<number> {
  const [row] = await db
    .select({ n: count() })
    .from(triggers)
    .where(and(eq(triggers.enabled, true), isNull(triggers.needsReconnectAt), isNull(triggers.composioDisabledAt)));
  return row?.n ?? 0;
}

/**
 * The on/off state the client asked for, once Composio has it: whatever Composio had stopped by
 * itself is now in the state the client chose, so Composio's stop is cleared.
 */
export async function setTriggerRowEnabled(db: Db, installationId: string, id: string, enabled: boolean): Promise<TriggerRow | undefined> {
  const [row] = await db
    .update(triggers)
    .set({ enabled, composioDisabledAt: null, composioDisabledReason: null })
    .where(and(eq(triggers.installationId, installationId), eq(triggers.id, id)))
    .returning();
  return row;
}

/**
 * Points the trigger at another account and its Composio trigger, and clears `needs_reconnect`
 * (and a stop by Composio, which was the old Composio trigger's);
 * only if the row still holds the Composio trigger it was read with (a concurrent change wins).
 */
export async function moveTriggerRow(
  db: DbOrTransaction,
  row: Pick<TriggerRow, 'id' | 'installationId' | 'composioTriggerId'>,
  to: { connectedAccountId: string; composioTriggerId: string; accountAlias: string | null },
): Promise<TriggerRow | undefined> {
  const [moved] = await db
    .update(triggers)
    .set({ ...to, needsReconnectAt: null, reconnectAskedAt: null, composioDisabledAt: null, composioDisabledReason: null })
    .where(
      and(eq(triggers.installationId, row.installationId), eq(triggers.id, row.id), eq(triggers.composioTriggerId, row.composioTriggerId)),
    )
    .returning();
  return moved;
}

/**
 * `moveTriggerRow`, unless the new account already carries `max` other triggers (`'full'`, and
 * nothing is written): decided under the account's lock, like `insertTriggerWithinCap`.
 */
export async function moveTriggerRowWithinCap(
  db: Db,
  row: Pick<TriggerRow, 'id' | 'installationId' | 'composioTriggerId'>,
  to: { connectedAccountId: string; composioTriggerId: string; accountAlias: string | null },
  max: number,
): Promise<TriggerRow | undefined | 'full'> {
  return db.transaction(async (tx) => {
    await lockAccountTriggers(tx, row.installationId, to.connectedAccountId);
    if ((await countAccountTriggers(tx, row.installationId, to.connectedAccountId, row.id)) >= max) return 'full';
    return moveTriggerRow(tx, row, to);
  });
}

/** Records the label of the account a trigger is on (learnt after the trigger was made). */
export async function setTriggerAccountAlias(db: Db, installationId: string, id: string, alias: string): Promise<void> {
  await db
    .update(triggers)
    .set({ accountAlias: alias })
    .where(and(eq(triggers.installationId, installationId), eq(triggers.id, id)));
}

/**
 * Notes that a sign-in link under `alias` was asked for: the installation's triggers of that app
 * waiting for a reconnect under that label. Labels compare case-insensitively.
 */
export async function noteReconnectAsked(db: Db, installationId: string, toolkit: string, alias: string, at: Date): Promise<void> {
  await db
    .update(triggers)
    .set({ reconnectAskedAt: at })
    .where(
      and(
        eq(triggers.installationId, installationId),
        eq(triggers.toolkit, toolkit),
        isNotNull(triggers.needsReconnectAt),
        sql`lower(trim(${triggers.accountAlias})) = ${alias.trim().toLowerCase()}`,
      ),
    );
}

/**
 * Triggers of every installation that lost their account, oldest loss first: what the
 * reconnect job looks at. Each write that follows is scoped by the row's own installation.
 */
export async function triggersNeedingReconnect(db: Db, limit: number): Promise<TriggerRow[]> {
  return db
    .select()
    .from(triggers)
    .where(isNotNull(triggers.needsReconnectAt))
    .orderBy(asc(triggers.needsReconnectAt), asc(triggers.id))
    .limit(limit);
}

/** Every installation's triggers, for the reconciliation with Composio. */
export async function allTriggerRows(db: Db): Promise<TriggerRow[]> {
  return db.select().from(triggers).orderBy(asc(triggers.id));
}

/**
 * Composio runs the trigger again (found so by the reconciliation): its stop is cleared, only if
 * the row still holds that Composio trigger.
 */
export async function clearComposioStop(db: Db, row: Pick<TriggerRow, 'id' | 'installationId' | 'composioTriggerId'>): Promise<void> {
  await db
    .update(triggers)
    .set({ composioDisabledAt: null, composioDisabledReason: null })
    .where(
      and(eq(triggers.installationId, row.installationId), eq(triggers.id, row.id), eq(triggers.composioTriggerId, row.composioTriggerId)),
    );
}

/**
 * Notes Composio triggers no row holds, keeping when each was first seen so; answers the ones
 * first seen at or before `seenBefore` (unowned for the whole grace period).
 */
export async function noteOrphans(db: Db, composioTriggerIds: readonly string[], now: Date, seenBefore: Date): Promise<string[]> {
  if (composioTriggerIds.length === 0) return [];
  await db
    .insert(triggerOrphans)
    .values(composioTriggerIds.map((composioTriggerId) => ({ composioTriggerId, firstSeenAt: now })))
    .onConflictDoNothing();
  const rows = await db
    .select({ id: triggerOrphans.composioTriggerId })
    .from(triggerOrphans)
    .where(and(inArray(triggerOrphans.composioTriggerId, [...composioTriggerIds]), lte(triggerOrphans.firstSeenAt, seenBefore)));
  return rows.map((r) => r.id);
}

/** Forgets the orphans that are not (or no longer) unowned on Composio: owned again, or deleted. */
export async function forgetOrphansExcept(db: Db, stillOrphaned: ReadonlySet<string>): Promise<void> {
  const noted = await db.select({ id: triggerOrphans.composioTriggerId }).from(triggerOrphans);
  const gone = noted.map((r) => r.id).filter((id) => !stillOrphaned.has(id));
  for (let at = 0; at < gone.length; at += 1000) {
    await db.delete(triggerOrphans).where(inArray(triggerOrphans.composioTriggerId, gone.slice(at, at + 1000)));
  }
}

export async function forgetOrphan(db: Db, composioTriggerId: string): Promise<void> {
  await db.delete(triggerOrphans).where(eq(triggerOrphans.composioTriggerId, composioTriggerId));
}

export async function deleteTriggerRow(db: Db, installationId: string, id: string): Promise<boolean> {
  const deleted = await db
    .delete(triggers)
    .where(and(eq(triggers.installationId, installationId), eq(triggers.id, id)))
    .returning({ id: triggers.id });
  return deleted.length > 0;
}

/** The installation's triggers (or one of them) with the counts of `day`, in creation order. */
export async function selectTriggerViews(db: Db, installationId: string, day: string, onlyId?: string): Promise<TriggerView[]> {
  const rows = await db
    .select({
      trigger: triggers,
      usage: { kept: triggerDailyUsage.kept, skipped: triggerDailyUsage.skipped, skippedReason: triggerDailyUsage.skippedReason },
    })
    .from(triggers)
    .leftJoin(triggerDailyUsage, and(eq(triggerDailyUsage.triggerId, triggers.id), eq(triggerDailyUsage.day, day)))
    .where(
      onlyId === undefined
        ? eq(triggers.installationId, installationId)
        : and(eq(triggers.installationId, installationId), eq(triggers.id, onlyId)),
    )
    .orderBy(asc(triggers.createdAt), asc(triggers.id));
  return rows.map((r) => toTriggerView(r.trigger, r.usage));
}

/** The constraint a Postgres unique violation (23505) names, looking through drizzle's wrapping. */
export function violatedUniqueConstraint(error: unknown): string | null {
  let current: unknown = error;
  for (let depth = 0; depth < 5 && current instanceof Error; depth++) {
    const pg = current as Error & { code?: unknown; constraint_name?: unknown };
    if (pg.code === '23505') return typeof pg.constraint_name === 'string' ? pg.constraint_name : '';
    current = current.cause;
  }
  return null;
}
