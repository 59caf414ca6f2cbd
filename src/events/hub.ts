/**
 * The in-process waiting room for long polls, keyed by installation. A wake only says "look
 * again": waiters re-read the database, so a lost or merged notification never loses an event.
 * Nothing here holds a database connection; thousands of polls cost a timer and a closure each.
 */

export type WakeReason =
  /** Something for this installation committed (or the listener reconnected): read again. */
  | 'event'
  /** The wait is over. */
  | 'timeout'
  /** The broker is shutting down: answer at once. */
  | 'closing'
  /** An operator disabled the installation. */
  | 'disabled'
  /** The client went away. */
  | 'aborted'
  /** The installation started more polls than it may hold: the oldest waiting one is answered now. */
  | 'superseded';

export interface Subscription {
  /** Settles once, with why the wait ended. */
  readonly woken: Promise<WakeReason>;
  /** Leaves the waiting room (idempotent); call it whatever happened. */
  cancel(): void;
}

interface Waiter {
  readonly installationId: string;
  settle(reason: WakeReason): void;
}

export class EventHub {
  private readonly waiters = new Map<string, Set<Waiter>>();
  private count = 0;
  private closing = false;

  /** `perInstallation`: waiting polls one installation may hold; a new one beyond supersedes the oldest. */
  constructor(private readonly perInstallation = Number.POSITIVE_INFINITY) {}

  /** How many polls are waiting right now. */
  get size(): number {
    return this.count;
  }

  /**
   * Waits for the next wake of `installationId`, at most `timeoutMs`. Subscribe BEFORE reading
   * the queue, so a commit between the read and the wait still wakes this waiter.
   */
  subscribe(installationId: string, timeoutMs: number, signal?: AbortSignal): Subscription {
    if (this.closing) return settled('closing');
    if (signal?.aborted) return settled('aborted');

    let resolve!: (reason: WakeReason) => void;
    const woken = new Promise<WakeReason>((r) => (resolve = r));
    let done = false;
    const onAbort = () => waiter.settle('aborted');
    const timer = setTimeout(() => waiter.settle('timeout'), Math.max(0, timeoutMs));
    const waiter: Waiter = {
      installationId,
      settle: (reason) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        this.remove(waiter);
        resolve(reason);
      },
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    let set = this.waiters.get(installationId);
    if (!set) {
      set = new Set();
      this.waiters.set(installationId, set);
    }
    // A Set keeps insertion order: the first is the oldest waiter.
    while (set.size >= this.perInstallation) set.values().next().value?.settle('superseded');
    set.add(waiter);
    this.count++;
    return { woken, cancel: () => waiter.settle('aborted') };
  }

  /** An event for this installation committed somewhere. */
  wake(installationId: string): void {
    this.settleAll(installationId, 'event');
  }

  /** Notifications may have been missed (the listener reconnected): every waiter reads again. */
  wakeAll(): void {
    for (const installationId of [...this.waiters.keys()]) this.settleAll(installationId, 'event');
  }

  /** The installation was disabled: its polls end at once. */
  disable(installationId: string): void {
    this.settleAll(installationId, 'disabled');
  }

  /** Shutdown: every waiting poll is answered now, and new ones do not wait. */
  closeAll(): void {
    this.closing = true;
    for (const installationId of [...this.waiters.keys()]) this.settleAll(installationId, 'closing');
  }

  private settleAll(installationId: string, reason: WakeReason): void {
    const set = this.waiters.get(installationId);
    if (!set) return;
    for (const waiter of [...set]) waiter.settle(reason);
  }

  private remove(waiter: Waiter): void {
    const set = this.waiters.get(waiter.installationId);
    if (!set?.delete(waiter)) return;
    this.count--;
    if (set.size === 0) this.waiters.delete(waiter.installationId);
  }
}

function settled(reason: WakeReason): Subscription {
  return { woken: Promise.resolve(reason), cancel: () => {} };
}
