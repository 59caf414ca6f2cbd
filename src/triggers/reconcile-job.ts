import { type RepeatingJob, startRepeatingJob } from '../repeating-job.js';
import { type ReconcileDeps, reconcileTriggers } from './reconcile.js';

/** Soon after start (a restored database is reconciled at once), not in the middle of starting up. */
const FIRST_RUN_DELAY_MS = 15_000;

/**
 * Reconciles the triggers with Composio (./reconcile.ts) shortly after start and then
 * `intervalMs` after each sweep ends (`TRIGGER_RECONCILE_MINUTES`), so sweeps never overlap and a
 * long one only delays the next; one process at a time does it. Failures are logged and the next
 * sweep tries again.
 */
export function startReconcileJob(deps: ReconcileDeps & { clock: { now(): Date }; intervalMs: number }): RepeatingJob {
  const run = async () => {
    try {
      await reconcileTriggers(deps, { now: deps.clock.now() });
    } catch (err) {
      deps.log.warn({ err }, 'trigger reconciliation failed');
    }
  };
  return startRepeatingJob(run, { intervalMs: deps.intervalMs, firstDelayMs: FIRST_RUN_DELAY_MS });
}
