/**
 * The in-process waiting room for long polls, keyed by installation. A wake only says "look
 * again": waiters re-read the database, so a lost or merged notification never loses an event.
 * Nothing here holds a database connection.
 *
 * A held poll is the larger part of a broker's memory (10,000 at once is ordinary), so a wait
 * holds no promise: it tells its `Sleeper` why it ended by calling it, its timer calls a shared
 * function with the waiter as argument, and an installation's only waiter is kept without a set
 * around it.
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
  /** The installation was removed (`DELETE /v1/me`): its token no longer works. */
  | 'removed'
  /** The installation started more polls than it may hold: the oldest waiting one is answered now. */
  | 'superseded';

/** Who waits: told once why the wait ended, unless the wait was cancelled first. */
export interface Sleeper {
  wake(reason: WakeReason): void;
}

export interface Wait {
  /** Leaves the waiting room without waking the sleeper (idempotent). */
  cancel(): void;
}

class Waiter implements Wait {
  private readonly timer: NodeJS.Timeout;
  private done = false;

  constructor(
    private readonly hub: EventHub,
    readonly installationId: string,
    timeoutMs: number,
    private readonly sleeper: Sleeper,
  ) {
    // Whole milliseconds: a fractional delay would be one more boxed number per held poll.
    this.timer = setTimeout(timedOut, Math.max(0, Math.ceil(timeoutMs)), this);
  }

  settle(reason: WakeReason): void {
    if (this.leave()) this.sleeper.wake(reason);
  }

  cancel(): void {
    this.leave();
  }

  /** False when the waiter had already left. */
  private leave(): boolean {
    if (this.done) return false;
    this.done = true;
    clearTimeout(this.timer);
    this.hub.forget(this);
    return true;
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
   * Waits for the next wake of `installationId`, at most `timeoutMs`; `sleeper.wake` says why it
   * ended. Wait BEFORE reading the queue, so a commit between the read and the wait still wakes
   * the sleeper. No wait (`undefined`) once the broker is closing: answer at once.
   */
  wait(installationId: string, timeoutMs: number, sleeper: Sleeper): Wait | undefined {
    if (this.closing) return undefined;
    // A Set keeps insertion order: the first is the oldest waiter.
    for (let held = this.held(installationId); held.length >= this.perInstallation; held = this.held(installationId)) {
      held[0]!.settle('superseded');
    }
    const waiter = new Waiter(this, installationId, timeoutMs, sleeper);
    const existing = this.waiters.get(installationId);
    if (existing === undefined) this.waiters.set(installationId, waiter);
    else if (existing instanceof Set) existing.add(waiter);
    else this.waiters.set(installationId, new Set([existing, waiter]));
    this.count++;
    return waiter;
  }

  /** The installations that have polls waiting. */
  installationIds(): string[] {
    return [...this.waiters.keys()];
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

  /** The installation was removed: its polls end at once. */
  remove(installationId: string): void {
    this.settleAll(installationId, 'removed');
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
