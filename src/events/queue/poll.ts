import { performance } from 'node:perf_hooks';
import type { Sql } from '../../db/database.js';
import { unauthorized } from '../../errors.js';
import { isDatabaseUnavailable } from '../../http/errors.js';
import { installationDisabled } from '../../installations/disable.js';
import type { QueuedEvent } from '../event.js';
import type { Sealing } from '../sealing.js';
import { decodeCursor, encodeCursor } from './cursor.js';
import type { EventHub, Sleeper, Wait, WakeReason } from './hub.js';
import type { QueueKnowledge } from './knowledge.js';
import { acknowledge, type QueueSlice, readQueue } from './queue.js';

export interface PollAnswer {
  readonly events: QueuedEvent[];
  readonly cursor: string;
  readonly gap?: true;
}

export interface PollResult {
  readonly answer: PollAnswer;
  /** Answered early because the broker is shutting down: the client should reconnect elsewhere. */
  readonly shuttingDown: boolean;
}

export interface PollDeps {
  readonly sql: Sql;
  readonly hub: EventHub;
  /** What this process knows of the queues: a poll it says has nothing to read waits, and ends, without reading. */
  readonly knowledge?: QueueKnowledge;
  /** Opens sealed events' data (absent: this process has no data keys). */
  readonly sealing?: Pick<Sealing, 'open'>;
}

export interface PollRequest {
  readonly installationId: string;
  readonly cursor: string | undefined;
  readonly limit: number;
  readonly waitMs: number;
}

/** Called once, with the poll's failure (an `HttpError` or a database error) or its result. */
export type PollDone = (error: Error | null, result?: PollResult) => void;

/** A long poll under way. */
export interface HeldPoll {
  /** Its client's connection closed before the answer: stop waiting, answer what there is. */
  hangUp(): void;
}

/**
 * One long poll of an installation's queue. A `cursor` acknowledges everything up to it and the
 * poll reads after it; without one, the poll reads after the last acknowledged event. With
 * nothing to return it waits up to `waitMs` for a wake from the hub, then reads again. `done` is
 * called once, with the answer or the failure.
 *
 * Not an async function: while it waits, a poll is this one object and its timer, with no
 * suspended frame or promise (10,000 held polls are ordinary).
 */
export function pollEvents(deps: PollDeps, request: PollRequest, done: PollDone): HeldPoll {
  const poll = new LongPoll(deps, request.installationId, request.limit, request.waitMs, done);
  poll.start(request.cursor);
  return poll;
}

/**
 * How soon a read after a wait that found the database unreachable is tried again: 250 ms, then
 * twice as long each time up to 2 s (the pool's own reconnect backoff is capped there too), each
 * spread by up to a quarter, so that thousands of held polls do not retry in step.
 */
const REREAD_AFTER_FAILURE_MS = 250;
const REREAD_AFTER_FAILURE_MAX_MS = 2_000;
const rereadDelay = (failures: number) =>
  Math.min(REREAD_AFTER_FAILURE_MS * 2 ** (failures - 1), REREAD_AFTER_FAILURE_MAX_MS) * (0.75 + Math.random() * 0.25);

class LongPoll implements Sleeper, HeldPoll {
  /** Where reads start: set by the cursor, then by each read, even if the acknowledged position moves meanwhile. */
  private after: number | null = null;
  private deadline = 0;
  private wait: Wait | undefined;
  /** `reading`: a read is under way (a wake now is kept in `woken` for its end); `idle`: the last read was empty, the next wake decides. */
  private state: 'reading' | 'idle' | 'finished' = 'reading';
  private woken: WakeReason | undefined;
  /** The last read found events after the start already removed by retention. */
  private gap = false;
  private hungUp = false;
  /** Set once the poll has waited: a read after a wait that finds the database unreachable retries (see readFailed). */
  private waited = false;
  private retry: NodeJS.Timeout | undefined;
  private failedReads = 0;

  constructor(
    private readonly deps: PollDeps,
    private readonly installationId: string,
    private readonly limit: number,
    private readonly waitMs: number,
    private readonly done: PollDone,
  ) {}

  start(cursor: string | undefined): void {
    if (cursor === undefined) {
      this.begin();
      return;
    }
    try {
      this.after = decodeCursor(this.installationId, cursor);
    } catch (error) {
      this.fail(error);
      return;
    }
    acknowledgeUpTo(this.deps, this.installationId, this.after)
      .then((known) => (known ? this.begin() : this.fail(unauthorized())))
      .catch((error: unknown) => this.fail(error));
  }

  hangUp(): void {
    if (this.hungUp) return;
    this.hungUp = true;
    this.wait?.cancel();
    this.wait = undefined;
    // Nobody is listening any more; whatever is answered goes nowhere. A read under way answers
    // when it ends, since there is no wait left.
    if (this.state === 'idle') this.answer(false);
  }

  wake(reason: WakeReason): void {
    this.wait = undefined;
    if (this.state === 'reading') this.woken = reason;
    else if (this.state === 'idle') this.decide(reason);
  }

  private begin(): void {
    this.deadline = performance.now() + this.waitMs;
    this.read();
  }

  private read(): void {
    this.state = 'reading';
    this.woken = undefined;
    const remaining = this.deadline - performance.now();
    // Wait before reading: a commit between the read and the wait still wakes this poll.
    if (remaining > 0 && !this.hungUp) {
      this.wait = this.deps.hub.wait(this.installationId, remaining, this);
      if (!this.wait) this.woken = 'closing';
    }
    // Known to be at the queue's head (and waiting already, so an append from now on wakes it):
    // what a read would answer is known, and the read is not made.
    const head = this.deps.knowledge?.nothingAfter(this.installationId, this.after);
    if (head !== undefined) {
      this.after = head;
      this.gap = false;
      this.failedReads = 0;
      this.nothingToAnswer();
      return;
    }
    readOnce(this.deps, this.installationId, this.after, this.limit)
      .then((slice) => this.onRead(slice))
      .catch((error: unknown) => this.readFailed(error));
  }

  /**
   * A read after a wait is often the first thing a poll does once an outage ends (every waiter is
   * woken when the LISTEN connection is back), and the pool's connections come back on their own
   * backoff: such a read that finds the database unreachable is tried again shortly while the
   * poll's time lasts, rather than answering `503` for events it is about to be able to read. The
   * first read, and every other failure, answers at once.
   */
  private readFailed(error: unknown): void {
    if (this.state !== 'reading') return;
    const timeLeft = this.deadline - performance.now() > REREAD_AFTER_FAILURE_MS;
    if (!this.waited || this.hungUp || !timeLeft || !isDatabaseUnavailable(error)) {
      this.fail(error);
      return;
    }
    const woken = this.woken;
    this.state = 'idle';
    this.woken = undefined;
    // A wake that needs no read (shutdown, disabled, removed, superseded) is answered as it would be.
    if (woken === 'closing' || woken === 'disabled' || woken === 'removed' || woken === 'superseded') {
      this.decide(woken);
      return;
    }
    this.retry = setTimeout(
      () => {
        this.retry = undefined;
        if (this.state !== 'idle') return;
        this.wait?.cancel();
        this.wait = undefined;
        this.read();
      },
      rereadDelay(++this.failedReads),
    );
  }

  private onRead(slice: QueueSlice | null): void {
    if (this.state !== 'reading') return;
    if (!slice) {
      this.fail(unauthorized());
      return;
    }
    this.after = slice.through;
    this.gap = slice.gap;
    this.failedReads = 0;
    if (slice.events.length > 0) this.finish({ answer: this.answerWith(slice.events), shuttingDown: false });
    else this.nothingToAnswer();
  }

  /** After a read (or what is known in place of one) found nothing: answer, or wait on. */
  private nothingToAnswer(): void {
    if (this.hungUp || (!this.wait && !this.woken)) this.answer(false);
    else if (this.woken) this.decide(this.woken);
    else this.state = 'idle';
  }

  /** After an empty read, what a wake means. */
  private decide(reason: WakeReason): void {
    this.waited = true;
    clearTimeout(this.retry);
    this.retry = undefined;
    switch (reason) {
      case 'event':
      case 'timeout':
        this.read();
        break;
      case 'superseded':
        // The installation opened more polls than it may hold; this, the oldest, ends now.
        this.answer(false);
        break;
      case 'closing':
        this.answer(true);
        break;
      case 'disabled':
        this.fail(installationDisabled());
        break;
      case 'removed':
        // What a read would find: the token is unknown now. The client registers anew on `401`.
        this.fail(unauthorized());
        break;
    }
  }

  /** Answers with the last, empty read. */
  private answer(shuttingDown: boolean): void {
    this.finish({ answer: this.answerWith([]), shuttingDown });
  }

  private answerWith(events: QueuedEvent[]): PollAnswer {
    const answer = { events, cursor: encodeCursor(this.installationId, this.after!) };
    return this.gap ? { ...answer, gap: true } : answer;
  }

  private finish(result: PollResult): void {
    if (this.end()) this.done(null, result);
  }

  private fail(error: unknown): void {
    if (this.end()) this.done(error instanceof Error ? error : new Error(String(error)));
  }

  /** False when the poll had already ended. */
  private end(): boolean {
    if (this.state === 'finished') return false;
    this.state = 'finished';
    this.wait?.cancel();
    this.wait = undefined;
    clearTimeout(this.retry);
    this.retry = undefined;
    return true;
  }
}

/**
 * Acknowledges every event up to `position`: false when the installation no longer exists,
 * `400 invalid_cursor` past its queue. A position this process knows to be acknowledged already
 * writes nothing and asks nothing (an acknowledgement never goes back).
 */
export async function acknowledgeUpTo(
  deps: Pick<PollDeps, 'sql' | 'knowledge'>,
  installationId: string,
  position: number,
): Promise<boolean> {
  const { knowledge } = deps;
  if (knowledge?.acknowledged(installationId, position)) return true;
  const ticket = knowledge?.ticket(installationId) ?? null;
  const last = await acknowledge(deps.sql, installationId, position);
  if (last === null) return false;
  knowledge?.learn(installationId, ticket, { head: last, acked: position });
  return true;
}

/**
 * Reads in flight, by installation, position and limit: a wake-up makes an installation's
 * waiting polls read again at the same moment, and those reading the same slice share one read.
 */
const reading = new Map<string, Promise<QueueSlice | null>>();

function readOnce(deps: PollDeps, installationId: string, after: number | null, limit: number): Promise<QueueSlice | null> {
  const key = `${installationId}:${after ?? ''}:${limit}`;
  let read = reading.get(key);
  if (!read) {
    const { knowledge } = deps;
    const ticket = knowledge?.ticket(installationId) ?? null;
    read = readQueue(deps.sql, installationId, { after, limit }, deps.sealing)
      .then((slice) => {
        // Read without a position, the read started after the acknowledged one.
        if (slice) knowledge?.learn(installationId, ticket, { head: slice.last, ...(after === null ? { acked: slice.start } : {}) });
        return slice;
      })
      .finally(() => reading.delete(key));
    reading.set(key, read);
  }
  return read;
}
