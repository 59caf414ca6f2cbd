/**
 * The in-process waiting room for long polls, keyed by installation. A wake only says "look
 * again": waiters re-read the database, so a lost or merged notification never loses an event.
 * Nothing here holds a database connection.
 *
 * A held poll is the larger part of a broker's memory (10,000 at once is ordinary), so a waiter
 * is one small object: its timer calls a shared function with the waiter as argument, its
 * installation's only waiter is kept without a set around it, and a client that hangs up ends
 * the wait through `PollClient` rather than an `AbortSignal` (an event target and two maps each).
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

/**
 * The client of one long poll: whether it has hung up, and the wait to end when it does. The
 * route calls `hangUp()` when the client's connection closes before the answer.
 */
export class PollClient {
  private hungUp = false;
  /** The wait under way for this client, if any. */
  private waiter: Waiter | undefined;

  get gone(): boolean {
    return this.hungUp;
  }

  hangUp(): void {
    this.hungUp = true;
    this.waiter?.settle('aborted');
  }

  /** @internal The hub's bookkeeping: which wait to end on a hang-up. */
  watch(waiter: Waiter | undefined): void {
    this.waiter = waiter;
  }

  /** @internal */
  watching(waiter: Waiter): boolean {
    return this.waiter === waiter;
  }
}

class Waiter implements Subscription {
  readonly woken: Promise<WakeReason>;
  private resolve!: (reason: WakeReason) => void;
  private readonly timer: NodeJS.Timeout;
  private done = false;

  constructor(
    private readonly hub: EventHub,
    readonly installationId: string,
    timeoutMs: number,
    private readonly client: PollClient | undefined,
  ) {
    this.woken = new Promise<WakeReason>((resolve) => {
      this.resolve = resolve;
    });
    this.timer = setTimeout(timedOut, Math.max(0, timeoutMs), this);
    client?.watch(this);
  }

  settle(reason: WakeReason): void {
    if (this.done) return;
    this.done = true;
    clearTimeout(this.timer);
    if (this.client?.watching(this)) this.client.watch(undefined);
    this.hub.forget(this);
    this.resolve(reason);
  }

  cancel(): void {
    this.settle('aborted');
  }
}

function timedOut(waiter: Waiter): void {
  waiter.settle('timeout');
}

export class EventHub {
  /** Waiters by installation: the waiter itself while it is the only one, else a set (oldest first). */
  private readonly waiters = new Map<string, Waiter | Set<Waiter>>();
  private count = 0;
  private closing = false;

  /** `perInstallation`: waiting polls one installation may hold; a new one beyond supersedes the oldest. */
  constructor(private readonly perInstallation = Number.POSITIVE_INFINITY) {}

  /** How many polls are waiting right now. */
  get size(): number {
    return this.count;
  }

  /**
   * Waits for the next wake of `installationId`, at most `timeoutMs`, or until `client` hangs up.
   * Subscribe BEFORE reading the queue, so a commit between the read and the wait still wakes
   * this waiter.
   */
  subscribe(installationId: string, timeoutMs: number, client?: PollClient): Subscription {
    if (this.closing) return settled('closing');
    if (client?.gone) return settled('aborted');
    // A Set keeps insertion order: the first is the oldest waiter.
    for (let held = this.held(installationId); held.length >= this.perInstallation; held = this.held(installationId)) {
      held[0]!.settle('superseded');
    }
    const waiter = new Waiter(this, installationId, timeoutMs, client);
    const existing = this.waiters.get(installationId);
    if (existing === undefined) this.waiters.set(installationId, waiter);
    else if (existing instanceof Set) existing.add(waiter);
    else this.waiters.set(installationId, new Set([existing, waiter]));
    this.count++;
    return waiter;
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

  /** @internal A waiter that settled leaves the room. */
  forget(waiter: Waiter): void {
    const existing = this.waiters.get(waiter.installationId);
    if (existing === waiter) this.waiters.delete(waiter.installationId);
    else if (existing instanceof Set && existing.delete(waiter)) {
      if (existing.size === 1) this.waiters.set(waiter.installationId, existing.values().next().value!);
    } else return;
    this.count--;
  }

  /** The installation's waiters, oldest first. */
  private held(installationId: string): Waiter[] {
    const existing = this.waiters.get(installationId);
    if (existing === undefined) return [];
    return existing instanceof Set ? [...existing] : [existing];
  }

  private settleAll(installationId: string, reason: WakeReason): void {
    for (const waiter of this.held(installationId)) waiter.settle(reason);
  }
}

function settled(reason: WakeReason): Subscription {
  return { woken: Promise.resolve(reason), cancel: () => {} };
}
