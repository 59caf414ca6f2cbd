import { and, sql as drizzleSql, eq, inArray, isNull } from 'drizzle-orm';
import type { Db, DbOrTransaction, Sql } from '../db/database.js';
import { installations } from '../db/schema.js';

/**
 * The only module that writes `installations`, apart from the two queue positions on each row
 * (`last_event_position`, `acked_event_position`): those belong to the event queue and are
 * written only by src/events/queue/queue.ts and webhook ingest's database functions, under the row
 * lock that keeps positions in order.
 */

export interface NewInstallation {
  readonly id: string;
  /** SHA-256 (hex) of the token; the token itself is never stored. */
  readonly tokenHash: string;
  readonly composioUserId: string;
}

export async function insertInstallation(db: DbOrTransaction, row: NewInstallation): Promise<void> {
  await db.insert(installations).values(row);
}

export interface CheckedInRow {
  id: string;
  /** Set when an operator disabled the installation: the token is known but refused. */
  disabled: boolean;
  composio_user_id: string;
  created_at: string;
}

/**
 * The installation holding this token hash (enabled or not), recording that an enabled one was
 * seen. One round trip; `last_seen_at` is written only when the stored one is older than
 * `resolutionSeconds`, so a busy installation does not write on every request.
 */
export async function checkIn(sql: Sql, tokenHash: string, resolutionSeconds: number): Promise<CheckedInRow | null> {
  const rows = await sql<CheckedInRow[]>`
    with found as (
      select id, composio_user_id, created_at, last_seen_at, disabled_at
      from installations
      where token_hash = ${tokenHash}
    ), touched as (
      update installations set last_seen_at = now()
      from found
      where installations.id = found.id
        and found.disabled_at is null
        and found.last_seen_at < now() - make_interval(secs => ${resolutionSeconds})
    )
    select id, disabled_at is not null as disabled, composio_user_id, created_at from found`;
  return rows[0] ?? null;
}

/**
 * Records these enabled installations as seen now, each only if the stored time is older than
 * `resolutionSeconds` (another process may have just done it). One statement for them all.
 */
export async function touchLastSeen(sql: Sql, installationIds: readonly string[], resolutionSeconds: number): Promise<void> {
  await sql`
    update installations set last_seen_at = now()
     where id = any(${sql.array(installationIds as string[])}::uuid[])
       and disabled_at is null
       and last_seen_at < now() - make_interval(secs => ${resolutionSeconds})`;
}

/** The installation's Tool Router Session as stored (either part may still be missing). */
export interface SessionColumns {
  readonly sessionId: string | null;
  readonly mcpUrl: string | null;
}

/** Undefined when the installation no longer exists. */
export async function storedSession(db: Db, installationId: string): Promise<SessionColumns | undefined> {
  const [row] = await db
    .select({ sessionId: installations.sessionId, mcpUrl: installations.sessionMcpUrl })
    .from(installations)
    .where(eq(installations.id, installationId));
  return row;
}

/**
 * Stores `session` in place of `previous` (null: none stored yet), only if `previous` is still
 * the stored one: of two requests racing to replace a Session, the first wins. Undefined when
 * another Session was stored first (or the installation is gone).
 */
export async function replaceStoredSession(
  db: Db,
  installationId: string,
  previous: string | null,
  session: { sessionId: string; mcpUrl: string },
): Promise<SessionColumns | undefined> {
  const [row] = await db
    .update(installations)
    .set({ sessionId: session.sessionId, sessionMcpUrl: session.mcpUrl })
    .where(
      and(
        eq(installations.id, installationId),
        previous === null ? isNull(installations.sessionId) : eq(installations.sessionId, previous),
      ),
    )
    .returning({ sessionId: installations.sessionId, mcpUrl: installations.sessionMcpUrl });
  return row;
}

/** Records the MCP URL of a Session moved over from the first version, which stored none. */
export async function storeSessionMcpUrl(db: Db, installationId: string, mcpUrl: string): Promise<void> {
  await db.update(installations).set({ sessionMcpUrl: mcpUrl }).where(eq(installations.id, installationId));
}

/**
 * Disables the installation at `at`, keeping the first time if it was disabled already.
 * Undefined for an unknown installation.
 */
export async function markDisabled(db: DbOrTransaction, installationId: string, at: Date): Promise<Date | undefined> {
  const [row] = await db
    .update(installations)
    .set({ disabledAt: drizzleSql`coalesce(${installations.disabledAt}, ${at.toISOString()}::timestamptz)` })
    .where(eq(installations.id, installationId))
    .returning({ disabledAt: installations.disabledAt });
  return row ? (row.disabledAt ?? at) : undefined;
}

/** Whether it was disabled; undefined for an unknown installation. */
export async function markEnabled(db: DbOrTransaction, installationId: string): Promise<boolean | undefined> {
  const rows = await db.execute<{ was_disabled: boolean }>(drizzleSql`
    update installations i set disabled_at = null
      from (select id, disabled_at is not null as was_disabled from installations where id = ${installationId} for update) before
     where i.id = before.id
    returning before.was_disabled`);
  const row = (rows as unknown as { was_disabled: boolean }[])[0];
  return row ? row.was_disabled : undefined;
}

/** Removes the installation's row; its triggers, events and counters go with it (cascade). */
export async function deleteInstallation(db: DbOrTransaction, installationId: string): Promise<void> {
  await db.delete(installations).where(eq(installations.id, installationId));
}

/** An installation exported from the first version: only hashes, never tokens. */
export interface ImportedInstallation extends NewInstallation {
  readonly sessionId: string | null;
  readonly createdAt: Date;
  readonly lastSeenAt: Date;
  readonly disabledAt: Date | null;
}

/** Which of `ids` are installations here already. */
export async function existingInstallationIds(db: DbOrTransaction, ids: readonly string[]): Promise<Set<string>> {
  const rows = await db
    .select({ id: installations.id })
    .from(installations)
    .where(inArray(installations.id, [...ids]));
  return new Set(rows.map((r) => r.id));
}

/** The installation holding each of these token hashes, for those that are held. */
export async function tokenHashHolders(db: DbOrTransaction, hashes: readonly string[]): Promise<Map<string, string>> {
  const rows = await db
    .select({ id: installations.id, tokenHash: installations.tokenHash })
    .from(installations)
    .where(inArray(installations.tokenHash, [...hashes]));
  return new Map(rows.map((r) => [r.tokenHash, r.id]));
}

/** Inserts imported installations, skipping ids that are already here; answers the ids inserted. */
export async function insertImportedInstallations(db: DbOrTransaction, rows: readonly ImportedInstallation[]): Promise<Set<string>> {
  const inserted = await db
    .insert(installations)
    .values(
      rows.map((row) => ({
        id: row.id,
        tokenHash: row.tokenHash,
        composioUserId: row.composioUserId,
        sessionId: row.sessionId,
        createdAt: row.createdAt,
        lastSeenAt: row.lastSeenAt,
        disabledAt: row.disabledAt,
      })),
    )
    .onConflictDoNothing({ target: installations.id })
    .returning({ id: installations.id });
  return new Set(inserted.map((r) => r.id));
}
