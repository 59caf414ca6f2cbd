import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Sql } from '../db/database.js';

/** A notification's payload; receivers treat it only as a hint to read the database again. */
export type NotificationHandler = (payload: string) => void;

/** The channel the listener sends its heartbeat on: it stands for the LISTEN connection itself. */
const HEARTBEAT_CHANNEL = 'omb_listener_heartbeat';

/**
 * The process's one LISTEN connection. Features register their channels with `on` before it
 * starts (the queue's wake-ups, a disabled installation, a webhook secret rotation); polls never
 * hold a database connection while they wait.
 *
 * After a reconnect notifications may have been missed, so every `onReconnect` handler runs, once
 * however many channels came back. postgres.js re-listens by itself when its connection drops,
 * but gives up for good if Postgres refuses it at that moment. So a heartbeat (a notification to
 * ourselves, sent through the pool) checks that notifications still arrive; when one does not,
 * the listening client is thrown away and a new one opened.
 */
export class NotificationListener {
  private client: Sql | undefined;
  private generation = 0;
  private heartbeat: NodeJS.Timeout | undefined;
  private awaitingPing: string | undefined;
  private pings = 0;
  private checking = false;
  private reconnectScheduled = false;
  private started = false;
  private readonly pingPrefix = `ping:${randomUUID()}:`;
  private readonly channels = new Map<string, NotificationHandler[]>();
  private readonly reconnectHandlers: Array<(reason: string) => void> = [];

  constructor(
    /** Sends the heartbeat: the broker's pool. */
    private readonly sql: Sql,
    /** Opens a client of its own for listening (postgres.js keeps LISTEN on one connection). */
    private readonly connect: () => Sql,
    private readonly log: Logger,
    private readonly heartbeatMs = 10_000,
  ) {}

  /** Calls `handler` with each notification on `channel`. Channels are registered before `start`. */
  on(channel: string, handler: NotificationHandler): void {
    if (this.started) throw new Error(`listener already started: register ${channel} before start()`);
    this.channels.set(channel, [...(this.channels.get(channel) ?? []), handler]);
  }

  /** Calls `handler` when notifications may have been missed (the connection came back or was replaced). */
  onReconnect(handler: (reason: string) => void): void {
    this.reconnectHandlers.push(handler);
  }

  async start(): Promise<void> {
    this.started = true;
    await this.listen();
    this.heartbeat = setInterval(() => void this.checkHeartbeat(), this.heartbeatMs);
    this.heartbeat.unref();
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
        HEARTBEAT_CHANNEL,
        (payload) => {
          if (current() && payload === this.awaitingPing) this.awaitingPing = undefined;
        },
        () => {
          // Runs on the first LISTEN and again after every reconnect of this client.
          if (current() && listening) this.reconnectedSoon('event listener reconnected');
          listening = true;
        },
      );
      for (const [channel, handlers] of this.channels) {
        await client.listen(channel, (payload) => {
          if (!current()) return;
          for (const handler of handlers) handler(payload);
        });
      }
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

  /**
   * Several reconnect callbacks can fire together; the handlers need calling once. And only once
   * the pool answers too: the LISTEN connection and the pool's connections come back each on
   * their own backoff, and a waiter woken while the pool still fails would answer `503` instead
   * of the events it missed. A pool that stays unreachable fails the probe within its timeouts,
   * and the handlers run all the same.
   */
  private reconnectedSoon(reason: string): void {
    if (this.reconnectScheduled) return;
    this.reconnectScheduled = true;
    setImmediate(() => {
      void this.sql`select 1`
        .catch(() => undefined)
        .then(() => {
          this.reconnectScheduled = false;
          for (const handler of this.reconnectHandlers) handler(reason);
        });
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
        this.reconnectedSoon('event listener replaced');
      }
      this.awaitingPing = `${this.pingPrefix}${++this.pings}`;
      await this.sql`select pg_notify(${HEARTBEAT_CHANNEL}, ${this.awaitingPing})`;
    } catch (err) {
      // Postgres is unreachable: the next beat tries again.
      this.log.warn({ err }, 'event listener heartbeat failed');
    } finally {
      this.checking = false;
    }
  }
}
