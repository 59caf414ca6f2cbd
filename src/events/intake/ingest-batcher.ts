import type { Logger } from 'pino';
import type { Sql } from '../../db/database.js';
import { isDatabaseUnavailable } from '../../http/errors.js';
import type { QueuedEventType } from '../event.js';
import { announcingQueued } from '../queue/notifier.js';
import type { WebhookOutcome } from './outcomes.js';

/** One trigger message as the ingest functions take it (migrations/functions/omb_ingest_trigger_alone_sealed.sql). */
export interface TriggerMessageInput {
  readonly eventId: string;
  /** Composio's trigger id (`metadata.trigger_id`). */
  readonly triggerId: string;
  readonly userId: string;
  /**
   * The delivery's `data` member, as its own text (src/events/intake/member-text.ts) made JSON
   * Postgres accepts (src/http/json-limits.ts `storableJsonText`): what is filtered and stored is
   * what Composio sent, not a JavaScript value written out again (which turns `1e400` into
   * `null`). The rest of the delivery is not sent: the database reads nothing else of it.
   */
  readonly dataJson: string;
  /** ISO timestamp. */
  readonly receivedAt: string;
  /** The UTC day the quota counts it in, `YYYY-MM-DD`, and when that day resets (ISO timestamp). */
  readonly day: string;
  readonly resetsAt: string;
  /** The id of the day's `quota.exceeded` event, should this message be the first one over the quota. */
  readonly quotaEventId: string;
  /** Kept events a day on each plan; the database applies the plan rule itself. */
  readonly quotaStandard: number;
  readonly quotaPaid: number;
  /**
   * The data sealed (base64, src/events/sealing.ts): stored instead of the clear `data`, which the
   * database still reads from `dataJson` for the trigger's filter (and never writes to a table or
   * the WAL). Absent: stored in clear.
   */
  readonly sealed?: string;
  /**
   * With `sealed`: the database needs `dataJson` for nothing but the trigger's filter (nothing in
   * it can fail to fit `jsonb`, src/http/json-limits.ts `mayExceedNumeric`). It is then sent only
   * for a trigger whose filter reads it: sent without, such a message is answered `needs_data`,
   * having stored and counted nothing, and goes again with it. Otherwise `dataJson` is always
   * sent, and Postgres parsing it refuses what `jsonb` cannot hold (`numeric_value_out_of_range`).
   */
  readonly dataForFilterOnly?: boolean;
}

export interface TriggerMessageRow {
  readonly outcome: WebhookOutcome;
  readonly installation: string | null;
  /** The type of the event the message queued, null when it queued none. */
  readonly queued: QueuedEventType | null;
}

interface Pending {
  readonly input: TriggerMessageInput;
  resolve(row: TriggerMessageRow): void;
  reject(error: unknown): void;
}

export interface IngestBatcherOptions {
  /** Transactions at once, at most. */
  readonly maxInFlight: number;
  /** Messages in one transaction, at most. */
  readonly maxBatch: number;
  /** How long the latest transaction runs before another may start beside it. */
  readonly laneAfterMs: number;
}

const DEFAULTS: IngestBatcherOptions = { maxInFlight: 2, maxBatch: 100, laneAfterMs: 20 };

/**
 * Group commit for webhook ingest. Each commit waits for a WAL flush, and on a machine whose
 * fsync takes a few hundred microseconds that, not CPU, caps one-message-per-transaction ingest.
 * So: a message is written at once while no transaction is running (no added latency when
 * traffic is light); otherwise it waits for that one and goes with every message that arrived
 * meanwhile, in one transaction (migrations/functions/omb_ingest_trigger_batch_sealed.sql). A
 * message is answered only after the transaction holding it has committed.
 *
 * One transaction at a time while they are quick: under load, fewer and larger batches cost less
 * per message than more, smaller ones (a batch's own statements are shared by all its messages;
 * with two at a time, the machine spent about a fifth more per webhook, `npm run bench:events`, see
 * docs/benchmarks.md). A transaction that has run `laneAfterMs` (a slow commit, a lock held by
 * another process) no longer holds the rest up: the messages behind it go in another one beside
 * it, up to `maxInFlight` at once.
 *
 * A batch that fails (a message Postgres refuses, a deadlock it broke) is retried one message
 * at a time, so one bad message never fails the others. One that fails because the database
 * cannot serve now (unreachable, not within `DATABASE_TIMEOUT_MS`, read-only) is not retried:
 * its messages, and every message waiting behind it, are refused at once with that error
 * (answered `503`, and Composio sends them again). So while the database is away no webhook
 * waits longer than the one bound for a batch ahead of it and then for its own.
 */
export class IngestBatcher {
  private queue: Pending[] = [];
  /** When each running transaction started (`performance.now()`), in the order they started. */
  private readonly running: number[] = [];
  private laneTimer: NodeJS.Timeout | undefined;
  private readonly ingest: ReturnType<typeof announcingQueued>;
  private readonly options: IngestBatcherOptions;

  constructor(
    sql: Sql,
    private readonly log: Logger,
    options: Partial<IngestBatcherOptions> = {},
  ) {
    this.ingest = announcingQueued(sql);
    this.options = { ...DEFAULTS, ...options };
  }

  write(input: TriggerMessageInput): Promise<TriggerMessageRow> {
    return new Promise((resolve, reject) => {
      this.queue.push({ input, resolve, reject });
      this.pump();
    });
  }

  private pump(): void {
    clearTimeout(this.laneTimer);
    this.laneTimer = undefined;
    while (this.running.length < this.options.maxInFlight && this.queue.length > 0) {
      const latest = this.running.at(-1);
      if (latest !== undefined) {
        const wait = latest + this.options.laneAfterMs - performance.now();
        if (wait > 0) {
          this.laneTimer = setTimeout(() => this.pump(), wait);
          return;
        }
      }
      const batch = this.queue.splice(0, this.options.maxBatch);
      const started = performance.now();
      this.running.push(started);
      void this.run(batch).finally(() => {
        this.running.splice(this.running.indexOf(started), 1);
        this.pump();
      });
    }
  }

  private async run(batch: Pending[]): Promise<void> {
    try {
      const rows = await this.call(batch.map((p) => p.input));
      const again: Pending[] = [];
      for (const [i, p] of batch.entries()) {
        const row = rows[i]!;
        if (row.outcome === NEEDS_DATA) again.push({ ...p, input: withData(p.input) });
        else p.resolve(row);
      }
      // First in the next transaction (this one has ended: nothing of theirs was stored).
      this.queue.unshift(...again);
    } catch (error) {
      if (isDatabaseUnavailable(error)) {
        const waiting = this.queue.splice(0);
        for (const p of [...batch, ...waiting]) p.reject(error);
        return;
      }
      if (batch.length === 1) {
        batch[0]!.reject(error);
        return;
      }
      this.log.warn({ err: error, messages: batch.length }, 'ingest batch failed; writing its messages one by one');
      await Promise.all(
        batch.map(async (p) => {
          try {
            p.resolve(await this.alone(p.input));
          } catch (single) {
            p.reject(single);
          }
        }),
      );
    }
  }

  /** One message in a transaction of its own, and in another with its data if the database asks for it. */
  private async alone(input: TriggerMessageInput): Promise<TriggerMessageRow> {
    const [row] = await this.call([input]);
    if (row!.outcome !== NEEDS_DATA) return row!;
    // `call` refuses a needs_data answer for a message sent with its data.
    return (await this.call([withData(input)]))[0] as TriggerMessageRow;
  }

  private async call(inputs: TriggerMessageInput[]): Promise<Answer[]> {
    // Sent as text and cast by Postgres, so it does not matter how this client serialises jsonb.
    type Row = Answer & { ordinal: number };
    const rows = await this.ingest<Row[]>`omb_ingest_trigger_batch_sealed(${messagesJson(inputs)}::text::jsonb)`;
    if (rows.length !== inputs.length) {
      throw new Error(`omb_ingest_trigger_batch_sealed answered ${rows.length} rows for ${inputs.length} messages`);
    }
    const byOrdinal: Answer[] = [];
    for (const row of rows) {
      if (row.outcome === NEEDS_DATA && sendsData(inputs[row.ordinal - 1]!)) {
        throw new Error(
          `omb_ingest_trigger_batch_sealed asked again for the data of event ${inputs[row.ordinal - 1]!.eventId}, which it was sent`,
        );
      }
      byOrdinal[row.ordinal - 1] = row;
    }
    return byOrdinal;
  }
}

/**
 * The database's answer to a sealed message sent without its clear data whose trigger's filter
 * reads it: nothing was stored or counted for it. Never an outcome of a webhook.
 */
const NEEDS_DATA = 'needs_data';

/** What the database answers for one message. */
type Answer = TriggerMessageRow | { readonly outcome: typeof NEEDS_DATA; readonly installation: string | null; readonly queued: null };

function sendsData(m: TriggerMessageInput): boolean {
  return m.sealed === undefined || m.dataForFilterOnly !== true;
}

function withData(m: TriggerMessageInput): TriggerMessageInput {
  return { ...m, dataForFilterOnly: false };
}

/**
 * The batch as JSON, splicing each message's data in as it is (it is JSON text already), as the
 * `data` of its `payload` (the ingest functions read `payload.data`), and its sealed data beside it;
 * a sealed message's `payload` only when the database must read its data (`sendsData`).
 */
function messagesJson(inputs: TriggerMessageInput[]): string {
  return `[${inputs
    .map(
      (m) =>
        `{"eventId":${JSON.stringify(m.eventId)},"triggerId":${JSON.stringify(m.triggerId)},"userId":${JSON.stringify(m.userId)},` +
        `"receivedAt":${JSON.stringify(m.receivedAt)},"day":${JSON.stringify(m.day)},"resetsAt":${JSON.stringify(m.resetsAt)},` +
        `"quotaEventId":${JSON.stringify(m.quotaEventId)},` +
        `"quotaStandard":${m.quotaStandard},"quotaPaid":${m.quotaPaid}` +
        `${sendsData(m) ? `,"payload":{"data":${m.dataJson}}` : ''}` +
        // Base64: nothing in it needs escaping.
        `${m.sealed === undefined ? '' : `,"sealed":"${m.sealed}"`}}`,
    )
    .join(',')}]`;
}
