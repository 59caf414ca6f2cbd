import { sql } from 'drizzle-orm';
import { nextUtcMidnight, utcDay } from '../clock.js';
import type { DbOrTransaction } from '../db/database.js';

export type Plan = 'standard' | 'paid';

export interface Quotas {
  readonly standard: number;
  readonly paid: number;
}

/**
 * The day's quota a plan gives. Webhook ingest makes the same choice inside the database
 * (`omb_ingest_trigger_alone`, from the same two settings): see CHANGELOG.md for why it is not
 * one function yet.
 */
export function eventsPerDay(plan: Plan, quotas: Quotas): number {
  return plan === 'paid' ? quotas.paid : quotas.standard;
}

/** The UTC day something at `at` counts in, and when that day's quota and allowances reset. */
export function quotaDay(at: Date): { day: string; resetsAt: Date } {
  return { day: utcDay(at), resetsAt: nextUtcMidnight(at) };
}

/*
 * The plan rule — `paid` while the installation holds a grant that has not expired and is not
 * revoked — is written once, as the database function `omb_paid_plans(at)`
 * (migrations/functions/omb_paid_plans.sql): `/v1/me`, the operators' figures and webhook ingest
 * all read it, so they cannot drift apart.
 */

/** The plan an installation is on at `now`, and when its grant ends. */
export async function currentPlan(
  db: DbOrTransaction,
  installationId: string,
  now: Date,
): Promise<{ plan: Plan; grantExpiresAt: Date | null }> {
  const rows = await db.execute<{ paid_until: string | Date }>(
    sql`select paid_until from omb_paid_plans(${now.toISOString()}::timestamptz) where installation_id = ${installationId}::uuid`,
  );
  const paidUntil = rows[0]?.paid_until;
  return paidUntil ? { plan: 'paid', grantExpiresAt: new Date(paidUntil) } : { plan: 'standard', grantExpiresAt: null };
}

/** How many enabled installations are on the paid plan at `now`. */
export async function countPaidInstallations(db: DbOrTransaction, now: Date): Promise<number> {
  const rows = await db.execute<{ paid: number }>(
    sql`select count(*)::int as paid
          from omb_paid_plans(${now.toISOString()}::timestamptz) p
          join installations i on i.id = p.installation_id
         where i.disabled_at is null`,
  );
  return rows[0]?.paid ?? 0;
}
