import type { Logger } from 'pino';
import type { Sql } from '../../db/database.js';
import type { NotificationListener } from '../queue/listener.js';
import { IngestBatcher } from './ingest-batcher.js';
import { WebhookOutcomeCounter } from './outcomes.js';
import { WEBHOOK_SECRETS_CHANNEL } from './webhook-secrets.js';

/** The per-process machinery behind incoming webhooks. */
export interface IntakeRuntime {
  /** Group commit for incoming trigger messages. */
  readonly batcher: IngestBatcher;
  readonly outcomes: WebhookOutcomeCounter;
  /** Calls `watcher` whenever another process announces a change of the accepted webhook secrets. */
  onWebhookSecretsChanged(watcher: () => void): () => void;
}

/** Registers the secrets channel on the process's listener, which must not have started yet. */
export function createIntakeRuntime(sql: Sql, listener: NotificationListener, logger: Logger): IntakeRuntime {
  const secretsWatchers = new Set<() => void>();
  const secretsChanged = () => {
    for (const watcher of secretsWatchers) watcher();
  };
  listener.on(WEBHOOK_SECRETS_CHANNEL, secretsChanged);
  // A rotation announced while not listening would otherwise wait for the periodic re-read.
  listener.onReconnect(secretsChanged);
  return {
    batcher: new IngestBatcher(sql, logger.child({ component: 'events' })),
    outcomes: new WebhookOutcomeCounter(),
    onWebhookSecretsChanged(watcher) {
      secretsWatchers.add(watcher);
      return () => secretsWatchers.delete(watcher);
    },
  };
}
