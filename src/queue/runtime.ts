import type { Logger } from 'pino';
import postgres from 'postgres';
import type { Database } from '../db/database.js';
import { INSTALLATION_REMOVED_CHANNEL } from '../installations/deletion.js';
import { INSTALLATION_DISABLED_CHANNEL } from '../installations/disable.js';
import { EventHub } from './hub.js';
import { type ListenClientOptions, NotificationListener } from './listener.js';
import { EVENTS_CHANNEL, EventNotifier } from './notifier.js';

/**
 * The per-process machinery behind the event queue: the waiting room for long polls, the one
 * LISTEN connection that feeds it (other features register their channels on it too), and the
 * coalescing notifier.
 */
export interface QueueRuntime {
  readonly hub: EventHub;
  readonly notifier: EventNotifier;
  /** The process's one LISTEN connection; register a channel with `listener.on` before `start`. */
  readonly listener: NotificationListener;
  /** Opens the LISTEN connection; polls are woken across processes from then on. */
  start(): Promise<void>;
  /** Answers every waiting poll now (empty), at the start of shutdown. */
  closeAll(): void;
  /** Sends pending notifications and stops listening; before the database closes. */
  stop(): Promise<void>;
}

/** `POLLS_PER_INSTALLATION`'s default: waiting polls one installation may hold. */
export const DEFAULT_POLLS_PER_INSTALLATION = 4;

export function createQueueRuntime(options: {
  database: Pick<Database, 'sql' | 'url'>;
  logger: Logger;
  pollsPerInstallation?: number;
  /** See NotificationListener's `heartbeatMs`. */
  listenerHeartbeatMs?: number;
}): QueueRuntime {
  const { sql, url } = options.database;
  const log = options.logger.child({ component: 'events' });
  const hub = new EventHub(options.pollsPerInstallation ?? DEFAULT_POLLS_PER_INSTALLATION);
  const notifier = new EventNotifier(sql, hub, log);
  const listenClient = (listening: ListenClientOptions) =>
    postgres(url, {
      ...listening,
      onnotice: () => {},
      connect_timeout: 10,
      connection: { application_name: 'omb-broker-listen' },
    });
  const listener = new NotificationListener(sql, listenClient, log, options.listenerHeartbeatMs);
  listenForQueue(listener, hub, log);
  let started: Promise<void> | undefined;
  return {
    hub,
    notifier,
    listener,
    start() {
      started ??= listener.start();
      return started;
    },
    closeAll() {
      hub.closeAll();
    },
    async stop() {
      hub.closeAll();
      await notifier.drain();
      if (started)
        await started.then(
          () => listener.stop(),
          () => undefined,
        );
    },
  };
}

/** Wakes the hub's waiters on what other processes announce, and all of them after a reconnect. */
export function listenForQueue(listener: NotificationListener, hub: EventHub, log: Logger): void {
  listener.on(EVENTS_CHANNEL, (installationId) => hub.wake(installationId));
  listener.on(INSTALLATION_DISABLED_CHANNEL, (installationId) => hub.disable(installationId));
  listener.on(INSTALLATION_REMOVED_CHANNEL, (installationId) => hub.remove(installationId));
  listener.onReconnect((reason) => {
    log.info({ waiting: hub.size }, `${reason}; waking every waiting poll to re-read`);
    hub.wakeAll();
  });
}
