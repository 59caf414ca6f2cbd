import type { Logger } from 'pino';
import type { DataKeys } from '../data-keys/keys.js';
import { open, SealError, seal } from '../data-keys/seal.js';
import type { Sql } from '../db/database.js';
import { PREVIOUS_RELEASE_APPLICATION_NAMES } from '../db/database.js';

/**
 * Trigger events' data encrypted at rest (src/data-keys/seal.ts): at ingest, the delivery's own
 * text of `data`, byte for byte, is sealed under the current data key and bound to the
 * installation's Composio user and the event's id (stored by
 * migrations/functions/omb_ingest_trigger_batch_sealed.sql); a poll opens it and hands that text
 * back as it came.
 *
 * Not while a broker of the previous release (0.1.0, which reads only clear data) is connected to
 * the database: it would serve a sealed event as `null`. So this process seals only once it has
 * seen none for `settleMs` (ten minutes), or none at its start, and stores clear data as before
 * meanwhile. The previous release's connections are told apart by their names (`application_name`,
 * which names this release in this release's connections: src/db/database.ts). The brokers of a
 * roll see the previous release's beside them and wait; one started after the roll seals at once.
 */
export class Sealing {
  /** The last time a previous-release broker was seen; null: none seen since this process started. */
  private previousSeenAt: number | null = null;
  private checked = false;
  /** Whether the current key is recorded in use: nothing is sealed before. */
  private recorded = false;
  private timer: NodeJS.Timeout | undefined;
  private readonly unreadableListeners = new Set<() => void>();
  private readonly startedListeners = new Set<(afterPrevious: boolean) => void>();

  constructor(
    readonly keys: DataKeys,
    private readonly sql: Sql,
    private readonly log: Logger,
    private readonly options: { checkEveryMs: number; settleMs: number; now?: () => number } = {
      checkEveryMs: 60_000,
      settleMs: 600_000,
    },
  ) {}

  /** Whether new trigger events are sealed now. */
  sealing(): boolean {
    return this.checked && this.recorded && this.quiet();
  }

  /** No previous-release broker seen since this process started, or none for `settleMs`. */
  private quiet(): boolean {
    return this.previousSeenAt === null || this.now() - this.previousSeenAt >= this.options.settleMs;
  }

  /** Looks for previous-release brokers now, then every `checkEveryMs`. */
  async start(): Promise<void> {
    await this.check();
    this.timer = setInterval(() => void this.check(), this.options.checkEveryMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /**
   * A trigger message's data (its text as Composio sent it, src/events/intake/member-text.ts)
   * sealed (base64), or undefined when it is stored in clear: not sealing now.
   */
  sealFor(userId: string, eventId: string, dataText: string): string | undefined {
    if (!this.sealing()) return undefined;
    return seal(this.keys, dataText, boundTo(userId, eventId)).toString('base64');
  }

  /**
   * The event's data text, or undefined when it does not open: under a key not configured, or not
   * sealed for this row (copied from another). Such an event is never served: it is logged, with
   * what names it, and counted (`onUnreadable`).
   */
  open(sealed: Buffer, row: { installationId: string; composioUserId: string; eventId: string; position: number }): string | undefined {
    try {
      return open(this.keys, sealed, boundTo(row.composioUserId, row.eventId)).toString('utf8');
    } catch (error) {
      if (!(error instanceof SealError)) throw error;
      this.log.error(
        { installationId: row.installationId, eventId: row.eventId, position: row.position, reason: error.message },
        'an event’s data does not decrypt for its row: left out of the poll’s answer',
      );
      for (const listener of this.unreadableListeners) listener();
      return undefined;
    }
  }

  /**
   * Calls `listener` each time this process begins to seal: at its start (`afterPrevious` false),
   * or once the previous release has gone (true: it stored data in clear meanwhile).
   */
  onStarted(listener: (afterPrevious: boolean) => void): () => void {
    this.startedListeners.add(listener);
    return () => this.startedListeners.delete(listener);
  }

  /** Calls `listener` for every event left out of an answer because it did not decrypt (the metrics count them). */
  onUnreadable(listener: () => void): () => void {
    this.unreadableListeners.add(listener);
    return () => this.unreadableListeners.delete(listener);
  }

  private now(): number {
    return (this.options.now ?? Date.now)();
  }

  private async check(): Promise<void> {
    try {
      // The key is recorded in use before the first value is sealed under it (data-keys/in-use.ts),
      // and again at every look, in the same statement: a rotation that retired it while this
      // process still seals under it (not yet given the new key) finds it back in use.
      const mayRecord = this.quiet();
      const [row] = await this.sql<{ previous: boolean }[]>`
        with previous as (select ${previousReleaseSeen(this.sql)} as connected),
             recorded as (
               insert into data_keys_in_use (key_id)
               select ${this.keys.current.id} from previous where not connected and ${mayRecord}
               on conflict do nothing)
        select connected as previous from previous`;
      const previous = row?.previous ?? false;
      const before = this.checked ? this.sealing() : undefined;
      if (previous) this.previousSeenAt = this.now();
      if (!previous && mayRecord) this.recorded = true;
      this.checked = true;
      const after = this.sealing();
      if (before !== after) {
        if (after) {
          this.log.info({ encrypting: this.keys.current.id }, 'events’ data is stored encrypted');
          for (const listener of this.startedListeners) listener(this.previousSeenAt !== null);
        } else
          this.log.warn(
            { settleMinutes: this.options.settleMs / 60_000 },
            'a broker of the previous release is connected: events’ data is stored in clear until none has been for a while',
          );
      }
    } catch (error) {
      // Nothing changes: a process that could not look keeps doing what it did.
      this.log.warn({ err: error }, 'could not look for brokers of the previous release');
    }
  }
}

/** Whether a broker of the previous release (which reads only clear data) is connected to the database now. */
export async function previousReleaseConnected(sql: Sql): Promise<boolean> {
  const [row] = await sql<{ previous: boolean }[]>`select ${previousReleaseSeen(sql)} as previous`;
  return row?.previous ?? false;
}

/** The SQL of that question, a fragment of a larger statement. */
function previousReleaseSeen(sql: Sql) {
  return sql`exists (select 1 from pg_stat_activity
                      where datname = current_database()
                        and application_name = any(string_to_array(${PREVIOUS_RELEASE_APPLICATION_NAMES.join(' ')}, ' ')))`;
}

/** The additional data a trigger event's sealed data is bound to: its installation's Composio user, and its id. */
export function boundTo(composioUserId: string, eventId: string): string {
  return `omb-event/1\u0000${composioUserId}\u0000${eventId}`;
}
