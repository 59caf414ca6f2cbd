import type { Db } from '../db/database.js';
import type { VerifiedGrant } from './grants.js';
import { currentPlan } from './plan.js';
import { grantRevoked, holdGrant } from './store.js';

/** `PUT /v1/me/grant`: hold the grant and answer the plan it gives. */
export async function presentGrant(
  db: Db,
  grant: VerifiedGrant,
  installationId: string,
  now: Date,
): Promise<{ plan: 'paid'; expiresAt: string }> {
  await holdGrant(db, grant, installationId, now);
  const { plan, grantExpiresAt } = await currentPlan(db, installationId, now);
  // Only a revocation committed between the check and the read can leave the plan standard.
  if (plan !== 'paid' || !grantExpiresAt) throw grantRevoked();
  return { plan, expiresAt: grantExpiresAt.toISOString() };
}
