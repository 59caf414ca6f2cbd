import { randomUUID } from 'node:crypto';
import type { Db, Sql } from '../db/database.js';
import type { VerifiedGrant } from '../plans/grants.js';
import { currentPlan, eventsPerDay, type Plan, type Quotas, quotaDay } from '../plans/plan.js';
import { holdGrant } from '../plans/store.js';
import { usageOn } from '../plans/usage.js';
import { checkIn, insertInstallation } from './store.js';
import { composioUserIdFor, hashToken, newToken } from './tokens.js';

/** What an authenticated request knows about its installation. */
export interface Installation {
  readonly id: string;
  readonly composioUserId: string;
  /** When it registered, in milliseconds since the epoch (a number: every authenticated request carries this). */
  readonly createdAtMs: number;
}

export async function registerInstallation(
  db: Db,
  withGrant?: { grant: VerifiedGrant; now: Date },
): Promise<{ installationId: string; token: string }> {
  const installationId = randomUUID();
  const token = newToken();
  const row = { id: installationId, tokenHash: hashToken(token), composioUserId: composioUserIdFor(installationId) };
  if (!withGrant) {
    await insertInstallation(db, row);
  } else {
    // One transaction: a grant found revoked while being bound leaves no installation behind.
    await db.transaction(async (tx) => {
      await insertInstallation(tx, row);
      await holdGrant(tx, withGrant.grant, installationId, withGrant.now);
    });
  }
  return { installationId, token };
}

/**
 * The installation holding the token whose SHA-256 is `tokenHash`; `'disabled'` when an operator
 * disabled it (the token is known, but refused until re-enabled); null when the token is
 * unknown. One round trip; it refreshes `last_seen_at` only when the stored one is older than
 * `lastSeenResolutionSeconds`, so a busy installation does not write on every request. (Most
 * requests never get here: src/installations/directory.ts answers from memory.)
 */
export async function authenticateHash(
  sql: Sql,
  tokenHash: string,
  lastSeenResolutionSeconds: number,
): Promise<Installation | 'disabled' | null> {
  const row = await checkIn(sql, tokenHash, lastSeenResolutionSeconds);
  if (!row) return null;
  if (row.disabled) return 'disabled';
  return { id: row.id, composioUserId: row.composio_user_id, createdAtMs: new Date(row.created_at).getTime() };
}

export interface MeView {
  installationId: string;
  plan: Plan;
  quota: { eventsPerDay: number; keptToday: number; skippedToday: number; resetsAt: string };
  createdAt: string;
}

/** The check-in answer: who the installation is, its plan and today's use of its quota. */
export async function describeInstallation(db: Db, installation: Installation, quotas: Quotas, now: Date): Promise<MeView> {
  const { day, resetsAt } = quotaDay(now);
  const [{ plan }, usage] = await Promise.all([currentPlan(db, installation.id, now), usageOn(db, installation.id, day)]);
  return {
    installationId: installation.id,
    plan,
    quota: {
      eventsPerDay: eventsPerDay(plan, quotas),
      keptToday: usage.kept,
      skippedToday: usage.skipped,
      resetsAt: resetsAt.toISOString(),
    },
    createdAt: new Date(installation.createdAtMs).toISOString(),
  };
}
