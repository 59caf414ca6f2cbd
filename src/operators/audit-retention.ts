import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { Sql } from '../db/database.js';
import { type RepeatingJob, startRepeatingJob } from '../repeating-job.js';
import { removeExpiredAudit } from './audit.js';

const DAY_MS = 86_400_000;
const FIRST_RUN_DELAY_MS = 30_000;

export type AuditRetentionJob = RepeatingJob;

/**
 * Removes audit entries older than `retentionDays` (`AUDIT_RETENTION_DAYS`), hourly and soon
 * after start. The event queue's own retention (src/events/retention/retention.ts) runs beside it; the
 * trail is the operators', so its pruning lives here. Two brokers pruning at once only delete
 * the same old rows. Failures are logged and retried at the next run.
 */
export function startAuditRetentionJob(options: {
  sql: Sql;
  clock: Clock;
  logger: Logger;
  retentionDays: number;
  intervalMs?: number;
}): AuditRetentionJob {
  const log = options.logger.child({ component: 'audit-retention' });
  const intervalMs = options.intervalMs ?? 3_600_000;
  const tick = async () => {
    try {
      const horizon = new Date(options.clock.now().getTime() - options.retentionDays * DAY_MS);
      const removed = await removeExpiredAudit(options.sql, horizon);
      if (removed > 0) log.info({ removed }, 'expired audit entries removed');
    } catch (err) {
      log.warn({ err }, 'removing expired audit entries failed; retrying at the next run');
    }
  };
  return startRepeatingJob(tick, { intervalMs, firstDelayMs: FIRST_RUN_DELAY_MS });
}
