import type { Db } from '../db/database.js';
import { currentPlan, eventsPerDay, type Quotas } from '../plans/plan.js';

/**
 * Below this many kept events today an installation is under its limit whatever its plan, so
 * ingest looks the plan up only once an installation gets near a limit.
 */
export function planThreshold(quotas: Quotas): number {
  return Math.min(quotas.standard, quotas.paid);
}

/** How many events the installation may keep on the UTC day of `now`. */
export async function dailyLimit(db: Db, installationId: string, now: Date, quotas: Quotas): Promise<number> {
  const { plan } = await currentPlan(db, installationId, now);
  return eventsPerDay(plan, quotas);
}
