import { eq } from 'drizzle-orm';
import type { DbOrTransaction } from '../db/database.js';
import { grants, revokedGrants } from '../db/schema.js';
import { forbidden } from '../errors.js';
import type { VerifiedGrant } from './grants.js';

/**
 * The only module that writes `grants` and `revoked_grants`. Which installations a grant makes
 * paid is read by the database function `omb_paid_plans` (see plan.ts).
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
