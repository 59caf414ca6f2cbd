import { count, sql } from 'drizzle-orm';
import { utcDay } from '../clock.js';
import type { Db } from '../db/database.js';
import { installations } from '../db/schema.js';
import { queueBacklog, queueFigures } from '../events/queue/queue.js';
import { type RegistrationMode, registrationMode } from '../installations/registration.js';
import { countPaidInstallations } from '../plans/plan.js';
import { totalUsageOn } from '../plans/usage.js';

/** The figures an operator looks at first: who uses the service, how much, and whether queues drain. */
export interface ServiceStats {
  generatedAt: string;
  registration: RegistrationMode;
  installations: {
    total: number;
    disabled: number;
    /** Enabled installations by the plan they are on now. */
    byPlan: { standard: number; paid: number };
    /** Seen (any authenticated request) in the last 24 hours. */
    activeLastDay: number;
  };
  events: { day: string; keptToday: number; skippedToday: number };
  queue: {
    /** Events not yet acknowledged by their installation, all installations together. */
    depth: number;
    oldestUnacknowledgedAt: string | null;
    oldestUnacknowledgedAgeSeconds: number | null;
  };
}

const DAY_MS = 86_400_000;

export async function serviceStats(db: Db, now: Date, configuredMode: RegistrationMode): Promise<ServiceStats> {
  const day = utcDay(now);
  const dayAgo = new Date(now.getTime() - DAY_MS).toISOString();
  const [mode, [population], paidCount, usage, queue] = await Promise.all([
    registrationMode(db, configuredMode),
    db
      .select({
        total: count(),
        disabled: count(installations.disabledAt),
        activeLastDay: sql<number>`count(*) filter (where ${installations.lastSeenAt} > ${dayAgo}::timestamptz)`.mapWith(Number),
      })
      .from(installations),
    countPaidInstallations(db, now),
    totalUsageOn(db, day),
    // The queue's own reading, the one `/metrics` and the installation lookup serve too.
    queueBacklog(db.$client),
  ]);

  const total = population?.total ?? 0;
  const disabled = population?.disabled ?? 0;
  return {
    generatedAt: now.toISOString(),
    registration: mode,
    installations: {
      total,
      disabled,
      byPlan: { standard: total - disabled - paidCount, paid: paidCount },
      activeLastDay: population?.activeLastDay ?? 0,
    },
    events: { day, keptToday: usage.kept, skippedToday: usage.skipped },
    queue: queueFigures(queue, now),
  };
}
