import { randomUUID } from 'node:crypto';
import { and, eq, gt, isNull, sql as drizzleSql } from 'drizzle-orm';
import type { Db, Sql } from '../db/database.js';
import { dailyUsage, grants, revokedGrants } from '../db/schema.js';
import { nextUtcMidnight, utcDay } from '../clock.js';
import type { VerifiedGrant } from '../plans/grants.js';
import { holdGrant } from '../plans/holding.js';
import { checkIn, insertInstallation } from './store.js';
import { composioUserIdFor, hashToken, newToken, TOKEN_PATTERN } from './tokens.js';

/** What an authenticated request knows about its installation. */
export interface Installation {
  readonly id: string;
  readonly composioUserId: string;
  readonly sessionId: string | null;
  readonly sessionMcpUrl: string | null;
  readonly createdAt: Date;
}

export type Plan = 'standard' | 'paid';

export interface Quotas {
  readonly standard: number;
  readonly paid: number;
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

/** How long a check-in may go unrecorded: `last_seen_at` is written at most this often. */
const LAST_SEEN_RESOLUTION_SECONDS = 60;

/**
 * The installation a bearer token names, or null when the token is unknown or disabled.
 * One round trip; it refreshes `last_seen_at` only when the stored one is older than a minute,
 * so a busy installation does not write on every request.
 */
export async function authenticate(sql: Sql, token: string): Promise<Installation | null> {
  if (!TOKEN_PATTERN.test(token)) return null;
  const row = await checkIn(sql, hashToken(token), LAST_SEEN_RESOLUTION_SECONDS);
  if (!row) return null;
  return {
    id: row.id,
    composioUserId: row.composio_user_id,
    sessionId: row.session_id,
    sessionMcpUrl: row.session_mcp_url,
    createdAt: new Date(row.created_at),
  };
}

/** The plan an installation is on now: `paid` while it holds a valid, unrevoked grant. */
export async function currentPlan(
  db: Db,
  installationId: string,
  now: Date,
): Promise<{ plan: Plan; grantExpiresAt: Date | null }> {
  const held = await db
    .select({ expiresAt: grants.expiresAt })
    .from(grants)
    .leftJoin(revokedGrants, eq(revokedGrants.jti, grants.jti))
    .where(and(eq(grants.holderInstallationId, installationId), gt(grants.expiresAt, now), isNull(revokedGrants.jti)))
    .orderBy(drizzleSql`${grants.expiresAt} desc`)
    .limit(1);
  const grant = held[0];
  return grant ? { plan: 'paid', grantExpiresAt: grant.expiresAt } : { plan: 'standard', grantExpiresAt: null };
}

export function eventsPerDay(plan: Plan, quotas: Quotas): number {
  return plan === 'paid' ? quotas.paid : quotas.standard;
}

export interface MeView {
  installationId: string;
  plan: Plan;
  quota: { eventsPerDay: number; keptToday: number; skippedToday: number; resetsAt: string };
  createdAt: string;
}

/** The check-in answer: who the installation is, its plan and today's use of its quota. */
export async function describeInstallation(
  db: Db,
  installation: Installation,
  quotas: Quotas,
  now: Date,
): Promise<MeView> {
  const [{ plan }, usage] = await Promise.all([
    currentPlan(db, installation.id, now),
    db
      .select({ kept: dailyUsage.kept, skipped: dailyUsage.skipped })
      .from(dailyUsage)
      .where(and(eq(dailyUsage.installationId, installation.id), eq(dailyUsage.day, utcDay(now)))),
  ]);
  return {
    installationId: installation.id,
    plan,
    quota: {
      eventsPerDay: eventsPerDay(plan, quotas),
      keptToday: usage[0]?.kept ?? 0,
      skippedToday: usage[0]?.skipped ?? 0,
      resetsAt: nextUtcMidnight(now).toISOString(),
    },
    createdAt: installation.createdAt.toISOString(),
  };
}
