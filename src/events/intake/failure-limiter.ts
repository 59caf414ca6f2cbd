import type { SharedCounters } from '../../db/counters.js';

/**
 * Counts failures per source address in fixed one-minute windows, so a flood of badly signed
 * webhooks is refused before any body is read or any HMAC computed. Successes are not counted:
 * Composio's own traffic is never limited. The counts live in the shared counters, so the limit
 * holds across every broker process.
 *
 * Only a failure asks the database: counting it answers where the address's window stands, and
 * an address that has reached the limit is then refused by this process from memory until the
 * window ends. A well-signed webhook costs no query here. Another process learns of an address
 * over the limit on that address's next failure there, which it answers `429` instead of `401`;
 * from then on it refuses the address before reading its body too.
 */
export class FailureLimiter {
  /** Addresses over the limit in this window, with when (ms, `now()`'s clock) their window ends. */
  private readonly refusedUntil = new Map<string, number>();
  private sweptAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly counters: SharedCounters,
    private readonly perWindow: number,
    private readonly windowMs = 60_000,
    private readonly now: () => number = () => Date.now(),
  ) {}

  /** Seconds until `address` may try again, or 0 when it may now. Never asks the database. */
  retryAfterSeconds(address: string): number {
    const until = this.refusedUntil.get(address);
    if (until === undefined) return 0;
    const left = until - this.now();
    if (left <= 0) {
      this.refusedUntil.delete(address);
      return 0;
    }
    return Math.max(1, Math.ceil(left / 1000));
  }

  /**
   * Counts one failure from `address`. Answers the seconds it must wait when this failure was
   * beyond the limit (the request is then refused as over the limit), else 0.
   */
  async recordFailure(address: string): Promise<number> {
    const { current, ttl } = await this.counters.hit(key(address), this.windowMs);
    if (current < this.perWindow) return 0;
    this.forgetEnded();
    this.refusedUntil.set(address, this.now() + ttl);
    return current > this.perWindow ? Math.max(1, Math.ceil(ttl / 1000)) : 0;
  }

  /** Drops ended windows (at most once a second), so a flood from many addresses leaves nothing behind. */
  private forgetEnded(): void {
    const now = this.now();
    if (now - this.sweptAt < 1000) return;
    this.sweptAt = now;
    for (const [address, until] of this.refusedUntil) if (until <= now) this.refusedUntil.delete(address);
  }
}

const key = (address: string) => `bad-webhook-signature|${address}`;
