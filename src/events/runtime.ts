import type { Logger } from 'pino';
import postgres from 'postgres';
import { type Database, reconnectBackoff } from '../db/database.js';
import { EventHub } from './hub.js';
import { IngestBatcher } from './ingest-batcher.js';
import { EventListener } from './listener.js';
import { EventNotifier } from './notifier.js';
import { WebhookOutcomeCounter } from './outcomes.js';

/**
 * The per-process machinery behind app events: the waiting room for long polls, the one LISTEN
 * connection that feeds it, the coalescing notifier, ingest's group commit, and the webhook
 * outcome counters.
 */
export interface EventsRuntime {
  readonly hub: EventHub;
  readonly notifier: EventNotifier;
  /** Group commit for incoming trigger messages. */
  readonly batcher: IngestBatcher;
  readonly outcomes: WebhookOutcomeCounter;
  /** Calls `watcher` whenever another process announces a change of the accepted webhook secrets. */
  onWebhookSecretsChanged(watcher: () => void): () => void;
  /** Opens the LISTEN connection; polls are woken across processes from then on. */
  start(): Promise<void>;
  /** Answers every waiting poll now (empty), at the start of shutdown. */
  closeAll(): void;
  /** Sends pending notifications and stops listening; before the database closes. */
  stop(): Promise<void>;
}

/** `POLLS_PER_INSTALLATION`'s default: waiting polls one installation may hold. */
export const DEFAULT_POLLS_PER_INSTALLATION = 4;

export function createEventsRuntime(options: {
  database: Pick<Database, 'sql' | 'url'>;
  logger: Logger;
  pollsPerInstallation?: number;
}): EventsRuntime {
  const { sql, url } = options.database;
  const log = options.logger.child({ component: 'events' });
  const hub = new EventHub(options.pollsPerInstallation ?? DEFAULT_POLLS_PER_INSTALLATION);
  const notifier = new EventNotifier(sql, hub, log);
  const listenClient = () =>
    postgres(url, {
      max: 1,
      onnotice: () => {},
      connect_timeout: 10,
      backoff: reconnectBackoff,
      connection: { application_name: 'omb-broker-listen' },
    });
  const listener = new EventListener(sql, listenClient, hub, log);
  let started: Promise<void> | undefined;
  return {
    hub,
    notifier,
    batcher: new IngestBatcher(sql, log),
    outcomes: new WebhookOutcomeCounter(),
    onWebhookSecretsChanged: (watcher) => listener.onWebhookSecretsChanged(watcher),
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
