import { and, desc, eq, gt, isNotNull, isNull, lte, sql } from 'drizzle-orm';
import type { Db, DbOrTransaction } from '../db/database.js';
import { grants, revokedGrants } from '../db/schema.js';
import { forbidden } from '../errors.js';
import type { VerifiedGrant } from './grants.js';

/**
 * The only module that writes `grants` and `revoked_grants`, and where the operators' list of
 * them is read (`presentedGrants`). Which installations a grant makes paid is read by the
 * database function `omb_paid_plans` (see plan.ts).
 */

export const grantRevoked = () => forbidden('the grant has been revoked by the operators', 'grant_revoked');

/**
 * Makes `installationId` the holder of the grant. A grant is bound by its `jti`, so the
 * installation that presented it last holds it and the previous holder drops to `standard`:
 * a Cloud that moves to a new installation takes its plan along, and a copied grant cannot
 * keep two installations paid.
 */
export async function holdGrant(db: DbOrTransaction, grant: VerifiedGrant, installationId: string, now: Date): Promise<void> {
  const revocation = await db.select({ jti: revokedGrants.jti }).from(revokedGrants).where(eq(revokedGrants.jti, grant.jti));
  if (revocation.length > 0) throw grantRevoked();
  const row = {
    subject: grant.subject,
    plan: grant.plan,
    holderInstallationId: installationId,
    issuedAt: grant.issuedAt,
    expiresAt: grant.expiresAt,
    presentedAt: now,
  };
  await db
    .insert(grants)
    .values({ jti: grant.jti, ...row })
    .onConflictDoUpdate({ target: grants.jti, set: row });
}

/** Refuses the grant from now on, wherever it is held; revoking twice changes nothing. */
export async function revokeGrant(
  db: DbOrTransaction,
  jti: string,
  now: Date,
): Promise<{ jti: string; revokedAt: string; revokedNow: boolean }> {
  const inserted = await db
    .insert(revokedGrants)
    .values({ jti, revokedAt: now })
    .onConflictDoNothing()
    .returning({ jti: revokedGrants.jti });
  const [row] = await db.select({ revokedAt: revokedGrants.revokedAt }).from(revokedGrants).where(eq(revokedGrants.jti, jti));
  return { jti, revokedAt: (row?.revokedAt ?? now).toISOString(), revokedNow: inserted.length > 0 };
}

export interface GrantFilters {
  subject?: string | undefined;
  installationId?: string | undefined;
  revoked?: boolean | undefined;
  /** Expired at `now` (see `presentedGrants`). */
  expired?: boolean | undefined;
}

export interface PresentedGrant {
  jti: string;
  subject: string;
  plan: string;
  holderInstallationId: string | null;
  issuedAt: Date;
  /** `issued_at` as Postgres writes it, microseconds kept: a position in the list that `after` takes back. */
  issuedKey: string;
  expiresAt: Date;
  presentedAt: Date;
  revokedAt: Date | null;
}

/**
 * Grants the broker has seen presented, each with its revocation if any, newest first (by
 * `issued_at`, then `jti`), `limit` of them from just past `after` (a row's `issuedKey` and
 * `jti`). A grant revoked before it was ever presented is not here: only its jti is known.
 */
export async function presentedGrants(
  db: Db,
  now: Date,
  filters: GrantFilters,
  page: { limit: number; after: { key: string; jti: string } | null },
): Promise<PresentedGrant[]> {
  const { after } = page;
  return db
    .select({
      jti: grants.jti,
      subject: grants.subject,
      plan: grants.plan,
      holderInstallationId: grants.holderInstallationId,
      issuedAt: grants.issuedAt,
      issuedKey: sql<string>`${grants.issuedAt}::text`,
      expiresAt: grants.expiresAt,
      presentedAt: grants.presentedAt,
      revokedAt: revokedGrants.revokedAt,
    })
    .from(grants)
    .leftJoin(revokedGrants, eq(revokedGrants.jti, grants.jti))
    .where(
      and(
        filters.subject === undefined ? undefined : eq(grants.subject, filters.subject),
        filters.installationId === undefined ? undefined : eq(grants.holderInstallationId, filters.installationId),
        filters.revoked === undefined ? undefined : filters.revoked ? isNotNull(revokedGrants.jti) : isNull(revokedGrants.jti),
        filters.expired === undefined ? undefined : filters.expired ? lte(grants.expiresAt, now) : gt(grants.expiresAt, now),
        // The key is compared as text cast back to a time: a Date would lose its microseconds.
        after === null ? undefined : sql`(${grants.issuedAt}, ${grants.jti}) < (${after.key}::timestamptz, ${after.jti})`,
      ),
    )
    .orderBy(desc(grants.issuedAt), desc(grants.jti))
    .limit(page.limit);
}
