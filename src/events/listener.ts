import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Sql } from '../db/database.js';
import { EVENTS_CHANNEL, INSTALLATION_DISABLED_CHANNEL, WEBHOOK_SECRETS_CHANNEL } from './channels.js';
import type { EventHub } from './hub.js';

/**
 * The process's one LISTEN connection, feeding the in-process hub. Polls never hold a database
 * connection while they wait.
 *
 * After a reconnect notifications may have been missed, so every waiter is woken to re-read.
 * postgres.js re-listens by itself when its connection drops, but gives up for good if Postgres
 * refuses it at that moment. So a heartbeat (a notification to ourselves, sent through the pool)
 * checks that notifications still arrive; when one does not, the listening client is thrown away
 * and a new one opened.
 */
export class EventListener {
  private client: Sql | undefined;
  private generation = 0;
  private heartbeat: NodeJS.Timeout | undefined;
  private awaitingPing: string | undefined;
  private pings = 0;
  private checking = false;
  private wakeAllScheduled = false;
  private readonly pingPrefix = `ping:${randomUUID()}:`;
  private readonly secretsWatchers = new Set<() => void>();

  constructor(
    /** Sends the heartbeat: the broker's pool. */
    private readonly sql: Sql,
    /** Opens a client of its own for listening (postgres.js keeps LISTEN on one connection). */
    private readonly connect: () => Sql,
    private readonly hub: EventHub,
    private readonly log: Logger,
    private readonly heartbeatMs = 10_000,
  ) {}

  async start(): Promise<void> {
    await this.listen();
    this.heartbeat = setInterval(() => void this.checkHeartbeat(), this.heartbeatMs);
    this.heartbeat.unref();
  }

  /** Calls `watcher` when the accepted webhook secrets may have changed (also after a reconnect). */
  onWebhookSecretsChanged(watcher: () => void): () => void {
    this.secretsWatchers.add(watcher);
    return () => this.secretsWatchers.delete(watcher);
  }

  private secretsChanged(): void {
    for (const watcher of this.secretsWatchers) watcher();
  }

  async stop(): Promise<void> {
    clearInterval(this.heartbeat);
    this.heartbeat = undefined;
    this.generation++;
    await this.dropClient();
  }

  private async listen(): Promise<void> {
    const generation = ++this.generation;
    const current = () => generation === this.generation;
    const client = this.connect();
    this.client = client;
    let listening = false;
    try {
      await client.listen(
        EVENTS_CHANNEL,
        (payload) => {
          if (!current()) return;
          if (payload.startsWith(this.pingPrefix)) {
            if (payload === this.awaitingPing) this.awaitingPing = undefined;
          } else if (!payload.startsWith('ping:')) {
            this.hub.wake(payload);
          }
        },
        () => {
          // Runs on the first LISTEN and again after every reconnect of this client.
          if (current() && listening) this.wakeAllSoon('event listener reconnected');
          listening = true;
        },
      );
      await client.listen(INSTALLATION_DISABLED_CHANNEL, (payload) => {
        if (current()) this.hub.disable(payload);
      });
      await client.listen(WEBHOOK_SECRETS_CHANNEL, () => {
        if (current()) this.secretsChanged();
      });
    } catch (error) {
      await this.dropClient();
      throw error;
    }
  }

  private async dropClient(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    await client?.end({ timeout: 0 }).catch(() => undefined);
  }

  /** Several reconnect callbacks can fire together; the waiters need waking once. */
  private wakeAllSoon(reason: string): void {
    if (this.wakeAllScheduled) return;
    this.wakeAllScheduled = true;
    setImmediate(() => {
      this.wakeAllScheduled = false;
      // A rotation announced while not listening would otherwise wait for the periodic re-read.
      this.secretsChanged();
      this.log.info({ waiting: this.hub.size }, `${reason}; waking every waiting poll to re-read`);
      this.hub.wakeAll();
    });
  }

  private async checkHeartbeat(): Promise<void> {
    if (this.checking) return;
    this.checking = true;
    try {
      if (this.awaitingPing !== undefined) {
        this.log.warn('event listener missed its heartbeat; listening on a new connection');
        await this.dropClient();
        await this.listen();
        this.wakeAllSoon('event listener replaced');
      }
      this.awaitingPing = `${this.pingPrefix}${++this.pings}`;
      await this.sql`select pg_notify(${EVENTS_CHANNEL}, ${this.awaitingPing})`;
    } catch (err) {
      // Postgres is unreachable: the next beat tries again.
      this.log.warn({ err }, 'event listener heartbeat failed');
    } finally {
      this.checking = false;
    }
  }
}
