import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { DEFAULT_LISTENER_HEARTBEAT_MS } from '../../config.js';
import type { Sql } from '../../db/database.js';

/** A notification's payload; receivers treat it only as a hint to read the database again. */
export type NotificationHandler = (payload: string) => void;

/**
 * What the listening client must be opened with; the caller adds where and how to connect.
 * `onnotify` is postgres.js's option behind its own `listen` (missing from its types): the
 * listener runs `LISTEN` itself on a plain client, so that `onclose` tells it the connection is
 * gone (a client's `listen` runs on an inner client of its own, whose closing is never told,
 * and which re-listens on its own schedule).
 */
export interface ListenClientOptions {
  max: 1;
  /** The connection stays open however long it is idle (0: never closed), and however old. */
  idle_timeout: 0;
  max_lifetime: null;
  fetch_types: false;
  onnotify: (channel: string, payload: string) => void;
  onclose: () => void;
}

/** The channel the listener sends its heartbeat on: it stands for the LISTEN connection itself. */
const HEARTBEAT_CHANNEL = 'omb_listener_heartbeat';

/**
 * How soon a lost LISTEN connection is tried again: at once, then after 250 ms, 500 ms, and
 * every second while Postgres refuses. One attempt at a time: at most one connection a second
 * against a Postgres that is down, and listening again within about a second of its return.
 */
const RELISTEN_FIRST_MS = 250;
const RELISTEN_MAX_MS = 1_000;
const relistenDelay = (failures: number) => Math.min(RELISTEN_FIRST_MS * 2 ** (failures - 1), RELISTEN_MAX_MS);
/** An attempt that has not listened by then (a frozen Postgres answers nothing) is given up. */
const ATTEMPT_TIMEOUT_MS = 10_000;
/** A heartbeat the pool could not send is sent again this soon, not at the next beat. */
const HEARTBEAT_RETRY_MS = 500;
/** The first heartbeat sent after such failures is checked this soon: the outage may have cut the LISTEN connection silently. */
const HEARTBEAT_RECHECK_MS = 1_000;

/**
 * The process's one LISTEN connection. Features register their channels with `on` before it
 * starts (the queue's wake-ups, a disabled installation, a webhook secret rotation); polls never
 * hold a database connection while they wait.
 *
 * When the connection closes, the listener opens a new one at once and, while Postgres refuses,
 * again on a short backoff (`relistenDelay`) until it listens. Notifications may have been missed
 * meanwhile, so every `onReconnect` handler then runs, once for all channels. A connection that
 * stops delivering without closing (a frozen Postgres, a network that drops packets) is caught by
 * the heartbeat: every `heartbeatMs` a notification to ourselves, sent through the pool, which
 * must have arrived by the next beat; when it has not, the connection is replaced the same way.
 */
export class NotificationListener {
  private client: Sql | undefined;
  private generation = 0;
  /** `lost`: the connection is gone and an attempt is under way or scheduled (exactly one). */
  private state: 'starting' | 'listening' | 'lost' | 'stopped' = 'starting';
  private lostAt = 0;
  private failedAttempts = 0;
  private relistenTimer: NodeJS.Timeout | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private awaitingPing: string | undefined;
  private heartbeatFailing = false;
  private pings = 0;
  private reconnectScheduled = false;
  private started = false;
  private readonly pingPrefix = `ping:${randomUUID()}:`;
  private readonly channels = new Map<string, NotificationHandler[]>();
  private readonly reconnectHandlers: Array<(reason: string) => void> = [];
  private readonly lostHandlers: Array<() => void> = [];
  /** Changes each time the connection is lost (see `epoch`). */
  private losses = 0;

  constructor(
    /** Sends the heartbeat: the broker's pool. */
    private readonly sql: Sql,
    /** Opens a client of its own for listening, with `options` (it holds one connection). */
    private readonly connect: (options: ListenClientOptions) => Sql,
    private readonly log: Logger,
    private readonly heartbeatMs = DEFAULT_LISTENER_HEARTBEAT_MS,
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

  /**
   * Calls `handler` the moment the connection is found gone or deaf, before any attempt to listen
   * again: what the process learnt while it heard the others can no longer be trusted.
   */
  onLost(handler: () => void): void {
    this.lostHandlers.push(handler);
  }

  /**
   * While the process hears every notification, a number that stays the same; null while it
   * cannot (not started yet, the connection lost, stopped). Knowledge kept up to date by
   * notifications is trusted only while the epoch it was learnt in is still the current one.
   * A connection that stops delivering without closing is found by the heartbeat, so trust
   * outlives the hearing by at most two heartbeats (`LISTENER_HEARTBEAT_MS`).
   */
  get epoch(): number | null {
    return this.state === 'listening' ? this.losses : null;
  }

  /** Listens on every registered channel; fails if Postgres cannot be reached now. */
  async start(): Promise<void> {
    this.started = true;
    await this.listen();
    if (this.state !== 'starting') return;
    this.state = 'listening';
    this.beatIn(this.heartbeatMs);
  }

  async stop(): Promise<void> {
    this.state = 'stopped';
    this.losses++;
    clearTimeout(this.heartbeat);
    clearTimeout(this.relistenTimer);
    this.generation++;
    await this.dropClient();
  }

  /** One attempt: a new client, `LISTEN` on every channel. Throws, with the client closed, if it fails. */
  private async listen(): Promise<void> {
    const generation = ++this.generation;
    const current = () => generation === this.generation;
    let listening = false;
    const client = this.connect({
      max: 1,
      idle_timeout: 0,
      max_lifetime: null,
      fetch_types: false,
      onnotify: (channel, payload) => {
        if (current()) this.notified(channel, payload);
      },
      onclose: () => {
        // Also called for an attempt's refused connection, which the failing statement reports.
        if (current() && listening) this.lost('its connection closed');
      },
    });
    this.client = client;
    const giveUp = setTimeout(() => void client.end({ timeout: 0 }).catch(() => undefined), ATTEMPT_TIMEOUT_MS);
    try {
      await client.unsafe([HEARTBEAT_CHANNEL, ...this.channels.keys()].map((channel) => `listen ${quoted(channel)}`).join('; '));
      listening = true;
    } catch (error) {
      if (current()) this.client = undefined;
      await client.end({ timeout: 0 }).catch(() => undefined);
      throw error;
    } finally {
      clearTimeout(giveUp);
    }
  }

  private notified(channel: string, payload: string): void {
    if (channel === HEARTBEAT_CHANNEL) {
      if (payload === this.awaitingPing) this.awaitingPing = undefined;
      return;
    }
    for (const handler of this.channels.get(channel) ?? []) handler(payload);
  }

  private async dropClient(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    await client?.end({ timeout: 0 }).catch(() => undefined);
  }

  /** The connection is gone or deaf: said once, then attempts until one listens. */
  private lost(reason: string): void {
    if (this.state !== 'listening') return;
    this.state = 'lost';
    this.losses++;
    for (const handler of this.lostHandlers) handler();
    this.lostAt = performance.now();
    this.failedAttempts = 0;
    this.awaitingPing = undefined;
    this.log.warn({ reason }, 'event listener lost its connection');
    void this.dropClient();
    this.relistenIn(0);
  }

  private relistenIn(delayMs: number): void {
    this.relistenTimer = setTimeout(() => void this.relisten(), delayMs);
    this.relistenTimer.unref();
  }

  private async relisten(): Promise<void> {
    if (this.state !== 'lost') return;
    try {
      await this.listen();
    } catch (err) {
      if (this.state !== 'lost') return;
      this.failedAttempts++;
      this.log.debug({ err, attempts: this.failedAttempts }, 'event listener could not listen yet');
      this.relistenIn(relistenDelay(this.failedAttempts));
      return;
    }
    if (this.state !== 'lost') return;
    this.state = 'listening';
    const afterMs = Math.round(performance.now() - this.lostAt);
    this.log.info({ afterMs, failedAttempts: this.failedAttempts }, `event listener listening again after ${afterMs} ms`);
    this.reconnectedSoon('event listener listening again');
  }

  /**
   * The handlers run once the pool answers too: the LISTEN connection and the pool's connections
   * come back each on their own backoff, and a waiter woken while the pool still fails would
   * answer `503` instead of the events it missed. A pool that stays unreachable fails the probe
   * within its timeouts, and the handlers run all the same.
   */
  private reconnectedSoon(reason: string): void {
    if (this.reconnectScheduled) return;
    this.reconnectScheduled = true;
    setImmediate(() => {
      void this.sql`select 1`
        .catch(() => undefined)
        .then(() => {
          this.reconnectScheduled = false;
          if (this.state === 'stopped') return;
          for (const handler of this.reconnectHandlers) handler(reason);
        });
    });
  }

  private beatIn(delayMs: number): void {
    this.heartbeat = setTimeout(() => void this.checkHeartbeat(), delayMs);
    this.heartbeat.unref();
  }

  /** While the connection is lost its attempts are at work, and the beat only keeps its time. */
  private async checkHeartbeat(): Promise<void> {
    let next = this.heartbeatMs;
    try {
      if (this.state === 'listening' && this.awaitingPing !== undefined) this.lost('it missed its heartbeat');
      if (this.state !== 'listening') return;
      const ping = `${this.pingPrefix}${++this.pings}`;
      this.awaitingPing = ping;
      try {
        await this.sql`select pg_notify(${HEARTBEAT_CHANNEL}, ${ping})`;
        if (this.heartbeatFailing) next = Math.min(HEARTBEAT_RECHECK_MS, this.heartbeatMs);
        this.heartbeatFailing = false;
      } catch (err) {
        // Not sent, so not awaited. Said once for a run of failures, which are retried soon.
        if (this.awaitingPing === ping) this.awaitingPing = undefined;
        if (!this.heartbeatFailing) this.log.warn({ err }, 'event listener heartbeat failed');
        this.heartbeatFailing = true;
        next = Math.min(HEARTBEAT_RETRY_MS, this.heartbeatMs);
      }
    } finally {
      if (this.state !== 'stopped') this.beatIn(next);
    }
  }
}

function quoted(channel: string): string {
  return `"${channel.replace(/"/g, '""')}"`;
}
