import { sql } from 'drizzle-orm';
import { nextUtcMidnight, utcDay } from '../clock.js';
import type { DbOrTransaction } from '../db/database.js';

export type Plan = 'standard' | 'paid';

export interface Quotas {
  readonly standard: number;
  readonly paid: number;
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
  return planOf(rows[0]?.paid_until);
}

/**
 * The plan at `now` and the day's quota it gives, in one statement. Which quota a plan gives is
 * decided by `omb_events_per_day` alone (migrations/functions/omb_events_per_day.sql), the
 * function ingest counts against, so what `/v1/me` shows is what ingest holds to.
 */
export async function currentPlanAndQuota(
  db: DbOrTransaction,
  installationId: string,
  now: Date,
  quotas: Quotas,
): Promise<{ plan: Plan; eventsPerDay: number }> {
  const at = now.toISOString();
  const rows = await db.execute<{ paid_until: string | Date | null; events_per_day: number }>(
    sql`select (select paid_until from omb_paid_plans(${at}::timestamptz) where installation_id = ${installationId}::uuid) as paid_until,
               omb_events_per_day(${installationId}::uuid, ${at}::timestamptz, ${quotas.standard}::int, ${quotas.paid}::int) as events_per_day`,
  );
  const row = rows[0];
  return { plan: planOf(row?.paid_until).plan, eventsPerDay: Number(row?.events_per_day) };
}

function planOf(paidUntil: string | Date | null | undefined): { plan: Plan; grantExpiresAt: Date | null } {
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
