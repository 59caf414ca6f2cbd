import type { Logger } from 'pino';
import type { Database } from '../db/database.js';
import { createIntakeRuntime, type IntakeRuntime } from './intake/runtime.js';
import { createQueueRuntime, type QueueRuntime } from './queue/runtime.js';

/**
 * The per-process machinery behind app events: the queue's (the waiting room for long polls, the
 * one LISTEN connection, the coalescing notifier) and the intake's (ingest's group commit, the
 * webhook outcome counters, the watch on the accepted webhook secrets).
 */
export type EventsRuntime = QueueRuntime & IntakeRuntime;

export function createEventsRuntime(options: {
  database: Pick<Database, 'sql' | 'url'>;
  logger: Logger;
  pollsPerInstallation?: number;
  listenerHeartbeatMs?: number;
  knownInstallations?: number;
}): EventsRuntime {
  const queue = createQueueRuntime(options);
  return { ...queue, ...createIntakeRuntime(options.database.sql, queue.listener, options.logger) };
}
