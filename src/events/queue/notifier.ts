import type { Row } from 'postgres';
import type { Sql } from '../../db/database.js';
import type { Hearing } from '../../db/hearing.js';
import type { QueuedEventType } from '../event.js';
import type { EventHub } from './hub.js';
import type { QueueKnowledge } from './knowledge.js';

/** Something was appended to the installation's queue (the payload is its id). */
export const EVENTS_CHANNEL = 'omb_events';

/** Which rows of a queueing function's answer queued an event, and for which installation. */
const QUEUED_ROWS = 'select installation from called where queued is not null and installation is not null';

/**
 * A template tag for one call of a queueing database function (`omb_ingest_*`,
 * `omb_queue_trigger_test`): what it is given is what follows `from`, and the statement sent
 * also announces on `EVENTS_CHANNEL` every installation the call queued an event for. The
 * announcement is part of the transaction that appends, so it is delivered if and only if the
 * events committed, whatever happens to this process after the commit: a process that hears
 * every notification knows every queue's head (src/events/queue/knowledge.ts), and a poll it says has
 * nothing to read is answered without reading. Still one statement, one round trip.
 *
 * `queuedRows`: SQL over the call's rows (`called`) giving, as `installation`, those for which an
 * event was queued; by default the rows whose `queued` is set.
 */
export function announcingQueued(sql: Sql, queuedRows = QUEUED_ROWS) {
  const wrapped = new WeakMap<TemplateStringsArray, TemplateStringsArray>();
  return <T extends readonly Row[]>(strings: TemplateStringsArray, ...values: unknown[]) => {
    let statement = wrapped.get(strings);
    if (!statement) {
      // `announced` is read (one row, its count), so Postgres runs it; the same notification
      // twice in one transaction is delivered once.
      const head = `with called as (select * from ${strings[0]}`;
      const tail = `${strings[strings.length - 1]}),
        announced as (select count(pg_notify('${EVENTS_CHANNEL}', q.installation::text)) as n from (${queuedRows}) q)
        select called.* from called, announced`;
      const parts = strings.length === 1 ? [`${head}${tail.slice(strings[0]!.length)}`] : [head, ...strings.slice(1, -1), tail];
      statement = Object.assign(parts, { raw: parts }) as unknown as TemplateStringsArray;
      wrapped.set(strings, statement);
    }
    return sql<T>(statement, ...(values as never[]));
  };
}

/** What is told of each event queued: its type (the metrics count them), and whose it is. */
export type QueuedListener = (type: QueuedEventType, installationId: string) => void;

/**
 * This process's side of an event queued: the one step every path that queues an event (webhook
 * ingest, a test event, a stop the reconciliation found) takes once the append committed. What
 * this process knew of the queue's head is dropped at once, so that a poll right after the
 * answer reads; and the listeners (the metrics, the sealing of what the database wrote in clear)
 * are told its type and installation.
 *
 * The waiting polls are woken once, by the announcement the append's own transaction sent, which
 * this process hears as every other does: waking them here as well woke each twice. While this
 * process cannot hear (its LISTEN connection lost), it wakes its own polls here, as nothing else
 * would.
 */
export class EventNotifier {
  private readonly listeners = new Set<QueuedListener>();

  constructor(
    private readonly hub: EventHub,
    private readonly knowledge: QueueKnowledge,
    private readonly hearing: Hearing,
  ) {}

  /** An event of `type` was queued for this installation, and committed. */
  queued(installationId: string, type: QueuedEventType): void {
    this.knowledge.heard(installationId);
    if (this.hearing.epoch === null) this.hub.wake(installationId);
    for (const listener of this.listeners) listener(type, installationId);
  }

  /** Calls `listener` for every event queued from now on; the answer stops it. */
  onQueued(listener: QueuedListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}
