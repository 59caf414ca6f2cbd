import type { Logger } from 'pino';
import type { Sql } from '../db/database.js';
import type { EventHub } from './hub.js';

/** Something was appended to the installation's queue (the payload is its id). */
export const EVENTS_CHANNEL = 'omb_events';

/**
 * Tells every broker process that an installation's queue grew, AFTER the append committed.
 *
 * A NOTIFY inside each ingest transaction would serialise commits database-wide (the notify
 * queue lock is held through the WAL flush). Instead, installations with new events are
 * collected for a millisecond, and for as long as the previous announcement is still
 * committing, then announced together in one statement: one notification per installation
 * however many events it got. Waiters in this process are woken
 * directly, without the round trip through Postgres.
 *
 * A failed notification loses no event: waiters elsewhere re-read the queue when their wait
 * ends (and the listener, listening again within about a second of an outage, wakes everyone).
 */
export class EventNotifier {
  private pending = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;

  constructor(
    private readonly sql: Sql,
    private readonly hub: EventHub,
    private readonly log: Logger,
    private readonly coalesceMs = 1,
  ) {}

  /** An append for this installation has committed. */
  committed(installationId: string): void {
    this.hub.wake(installationId);
    this.pending.add(installationId);
    this.schedule();
  }

  /** Sends whatever is pending now (at shutdown). */
  async drain(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    while (this.flushing || this.pending.size > 0) {
      if (this.flushing) await this.flushing;
      else await this.flush();
    }
  }

  private schedule(): void {
    // One batch in flight at a time; what arrives meanwhile goes out in the next one.
    if (this.timer || this.flushing) return;
    this.timer = setTimeout(() => void this.flush(), this.coalesceMs);
  }

  private flush(): Promise<void> {
    this.timer = undefined;
    const installationIds = [...this.pending];
    this.pending = new Set();
    if (installationIds.length === 0) return Promise.resolve();
    this.flushing = this.send(installationIds).finally(() => {
      this.flushing = undefined;
      if (this.pending.size > 0) this.schedule();
    });
    return this.flushing;
  }

  private async send(installationIds: string[]): Promise<void> {
    try {
      await this.sql`select pg_notify(${EVENTS_CHANNEL}, id) from unnest(${this.sql.array(installationIds)}::text[]) as id`;
    } catch (err) {
      this.log.warn({ err, installations: installationIds.length }, 'could not notify other brokers of new events');
    }
  }
}
