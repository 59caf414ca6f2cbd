import type { Hearing } from '../../db/hearing.js';

/**
 * What this process knows of each installation's queue, so that a poll with nothing to read
 * costs no statement: `head`, the last position appended, and `acked`, a position the
 * installation is known to have acknowledged (the acknowledged position never goes back, so
 * any position once seen acknowledged is a safe lower bound).
 *
 * The head is learnt from reads (every queue read and acknowledgement answers the queue's last
 * position) and lost the moment a notification says the queue grew: every append announces its
 * installation in the transaction that appends (src/events/queue/notifier.ts `announcingQueued`), so
 * while this process hears every notification (`Hearing`), a head it knows is the queue's head.
 * A read that was under way when such a notification arrived may have seen the queue before the
 * append, so what it answers is not taken as the head (`ticket`, `learn`). When the LISTEN
 * connection is lost everything is forgotten, and nothing is learnt while it is down.
 *
 * Bounded: past `capacity` installations, the one first read the longest ago is forgotten (a
 * forgotten installation costs its next poll one read).
 */
export class QueueKnowledge {
  private readonly queues = new Map<string, QueueState>();
  /** Counts notifications heard: a ticket older than an installation's last one learns no head. */
  private heardCount = 0;

  constructor(
    private readonly hearing: Hearing,
    private readonly capacity = 1_000_000,
  ) {}

  /** Taken before a read of the installation's queue; handed back with what the read found. */
  ticket(installationId: string): Ticket | null {
    const epoch = this.hearing.epoch;
    if (epoch === null) return null;
    let state = this.queues.get(installationId);
    if (!state) {
      state = { head: 0, headKnown: false, acked: 0, lastHeard: 0 };
      this.remember(installationId, state);
    }
    return { epoch, heard: this.heardCount };
  }

  /**
   * What a read that began with `ticket` found: the queue's last position, and a position known
   * acknowledged. The head is taken only if nothing was heard of the queue since the read began.
   */
  learn(installationId: string, ticket: Ticket | null, found: { head: number; acked?: number }): void {
    if (!ticket || ticket.epoch !== this.hearing.epoch) return;
    const state = this.queues.get(installationId);
    if (!state) return;
    if (found.acked !== undefined && found.acked > state.acked) state.acked = found.acked;
    if (state.lastHeard > ticket.heard) return;
    state.head = state.headKnown ? Math.max(state.head, found.head) : found.head;
    state.headKnown = true;
  }

  /** Something was appended to the installation's queue: its head is unknown until read again. */
  heard(installationId: string): void {
    const state = this.queues.get(installationId);
    if (!state) return;
    state.headKnown = false;
    state.lastHeard = ++this.heardCount;
  }

  /**
   * The queue's head when a poll reading after `after` (null: after the acknowledged position)
   * is known to have nothing to read; undefined when it may have, or nothing is known.
   */
  nothingAfter(installationId: string, after: number | null): number | undefined {
    if (this.hearing.epoch === null) return undefined;
    const state = this.queues.get(installationId);
    if (!state?.headKnown) return undefined;
    // The acknowledged position lies between `acked` and the head: equal, it is the head.
    const from = after ?? state.acked;
    return from === state.head ? state.head : undefined;
  }

  /** True when the installation is known to have acknowledged `position` already (acknowledging it again changes nothing). */
  acknowledged(installationId: string, position: number): boolean {
    const state = this.queues.get(installationId);
    return state !== undefined && position <= state.acked;
  }

  /** The installation was removed: nothing of it is kept. */
  forget(installationId: string): void {
    this.queues.delete(installationId);
  }

  /** Notifications may have been missed: nothing known is trusted any more. */
  forgetAll(): void {
    this.queues.clear();
  }

  private remember(installationId: string, state: QueueState): void {
    if (this.queues.size >= this.capacity) {
      // A Map iterates in insertion order: the first is the one first read the longest ago.
      const oldest = this.queues.keys().next().value;
      if (oldest !== undefined) this.queues.delete(oldest);
    }
    this.queues.set(installationId, state);
  }
}

interface QueueState {
  /** The queue's last position, when `headKnown`. */
  head: number;
  headKnown: boolean;
  /** A position the installation has acknowledged (the acknowledged one may be further). */
  acked: number;
  /** `heardCount` when the queue was last heard to grow. */
  lastHeard: number;
}

/** Where a read began: the hearing's epoch and how many notifications had been heard. */
export interface Ticket {
  readonly epoch: number;
  readonly heard: number;
}
