import type { Logger } from 'pino';
import type { DataKeys } from '../data-keys/keys.js';
import type { Database } from '../db/database.js';
import { createIntakeRuntime, type IntakeRuntime } from './intake/runtime.js';
import { createQueueRuntime, type QueueRuntime } from './queue/runtime.js';
import { QueuedInClearSealer, sealStoredInClear } from './rotation.js';
import { Sealing } from './sealing.js';

/**
 * The per-process machinery behind app events: the queue's (the waiting room for long polls, the
 * one LISTEN connection, the coalescing notifier), the intake's (ingest's group commit, the
 * webhook outcome counters, the watch on the accepted webhook secrets), and the sealing of events'
 * data with the data keys (none without keys: then data is stored and read in clear): trigger
 * events as they are written, the others right after (QueuedInClearSealer), and a pass over what
 * was stored in clear once the previous release has gone.
 */
export type EventsRuntime = QueueRuntime & IntakeRuntime & { readonly sealing: Sealing | undefined };

export function createEventsRuntime(options: {
  database: Pick<Database, 'sql' | 'sessionUrl'>;
  logger: Logger;
  pollsPerInstallation?: number;
  listenerHeartbeatMs?: number;
  knownInstallations?: number;
  dataKeys?: DataKeys;
  /** How often to look for previous-release brokers, and how long none must have been seen (see Sealing). */
  sealingChecks?: { checkEveryMs: number; settleMs: number };
}): EventsRuntime {
  const queue = createQueueRuntime(options);
  const log = options.logger.child({ component: 'events' });
  const sealing = options.dataKeys && new Sealing(options.dataKeys, options.database.sql, log, options.sealingChecks);
  // Once the previous release has gone, what was stored in clear is sealed too, in the background.
  // Not at an ordinary start: finding nothing would cost a read of every event kept.
  const stopping = new AbortController();
  let clearing: Promise<void> | undefined;
  sealing?.onStarted((afterPrevious) => {
    if (!afterPrevious) return;
    clearing ??= sealStoredInClear(options.database.sql, sealing.keys, log, stopping.signal)
      .catch((err: unknown) => {
        if (!stopping.signal.aborted)
          log.warn({ err }, 'could not encrypt the events stored in clear; trying again when sealing starts again');
      })
      .finally(() => {
        clearing = undefined;
      });
  });
  const sealer = sealing && new QueuedInClearSealer(options.database.sql, sealing, log);
  const stopSealingQueued = sealer ? queue.notifier.onQueued((type, installationId) => sealer.queued(installationId, type)) : () => {};
  return {
    ...queue,
    ...createIntakeRuntime(options.database.sql, queue.listener, options.logger),
    sealing,
    async start() {
      await Promise.all([queue.start(), sealing?.start()]);
    },
    async stop() {
      sealing?.stop();
      stopping.abort();
      stopSealingQueued();
      await Promise.all([clearing, sealer?.stop()]);
      await queue.stop();
    },
  };
}
