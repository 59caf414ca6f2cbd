import { performance } from 'node:perf_hooks';
import type { Sql } from '../db/database.js';
import { unauthorized } from '../errors.js';
import { installationDisabled } from '../installations/guard.js';
import { decodeCursor, encodeCursor } from './cursor.js';
import type { EventHub, PollClient } from './hub.js';
import { acknowledge, type QueuedEvent, type QueueSlice, readQueue } from './queue.js';

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

/**
 * One long poll of an installation's queue. A `cursor` acknowledges everything up to it and the
 * poll reads after it; without one, the poll reads after the last acknowledged event. With
 * nothing to return it waits up to `waitMs` for a wake from the hub, then reads again.
 * `client` ends the wait when it hangs up.
 */
export async function pollEvents(
  deps: { sql: Sql; hub: EventHub },
  request: { installationId: string; cursor: string | undefined; limit: number; waitMs: number; client?: PollClient },
): Promise<PollResult> {
  const { sql, hub } = deps;
  const { installationId, limit } = request;
  let after: number | null = null;
  if (request.cursor !== undefined) {
    after = decodeCursor(installationId, request.cursor);
    if (!(await acknowledge(sql, installationId, after))) throw unauthorized();
  }

  const deadline = performance.now() + request.waitMs;
  for (;;) {
    const remaining = deadline - performance.now();
    // Subscribe before reading: a commit between the read and the wait still wakes us.
    const subscription = remaining > 0 ? hub.subscribe(installationId, remaining, request.client) : undefined;
    try {
      const slice = await readOnce(sql, installationId, after, limit);
      if (!slice) throw unauthorized();
      // Later reads start where the first one did, even if the acknowledged position moves meanwhile.
      after = slice.through;
      if (slice.events.length > 0 || !subscription) return { answer: answerWith(installationId, slice), shuttingDown: false };
      switch (await subscription.woken) {
        case 'event':
        case 'timeout':
          continue;
        case 'superseded':
          // The installation opened more polls than it may hold; this, the oldest, ends now.
          return { answer: answerWith(installationId, slice), shuttingDown: false };
        case 'closing':
          return { answer: answerWith(installationId, slice), shuttingDown: true };
        case 'aborted':
          // Nobody is listening any more; whatever is answered goes nowhere.
          return { answer: answerWith(installationId, slice), shuttingDown: false };
        case 'disabled':
          throw installationDisabled();
      }
    } finally {
      subscription?.cancel();
    }
  }
}

function answerWith(installationId: string, slice: QueueSlice): PollAnswer {
  const answer = { events: slice.events, cursor: encodeCursor(installationId, slice.through) };
  return slice.gap ? { ...answer, gap: true } : answer;
}

/**
 * Reads in flight, by installation, position and limit: a wake-up makes an installation's
 * waiting polls read again at the same moment, and those reading the same slice share one read.
 */
const reading = new Map<string, Promise<QueueSlice | null>>();

function readOnce(sql: Sql, installationId: string, after: number | null, limit: number): Promise<QueueSlice | null> {
  const key = `${installationId}:${after ?? ''}:${limit}`;
  let read = reading.get(key);
  if (!read) {
    read = readQueue(sql, installationId, { after, limit }).finally(() => reading.delete(key));
    reading.set(key, read);
  }
  return read;
}
