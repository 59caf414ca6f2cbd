import type { SharedCounters } from '../db/counters.js';

/**
 * Counts failures per source address in fixed one-minute windows, so a flood of badly signed
 * webhooks is refused before any body is read or any HMAC computed. Successes are not counted:
 * Composio's own traffic is never limited. The counts live in the shared counters, so the limit
 * holds across every broker process.
 */
export class FailureLimiter {
  constructor(
    private readonly counters: SharedCounters,
    private readonly perWindow: number,
    private readonly windowMs = 60_000,
  ) {}

  /** Seconds until `address` may try again, or 0 when it may now. */
  async retryAfterSeconds(address: string): Promise<number> {
    const { current, ttl } = await this.counters.read(key(address));
    if (current < this.perWindow) return 0;
    return Math.max(1, Math.ceil(ttl / 1000));
  }

  async recordFailure(address: string): Promise<void> {
    await this.counters.hit(key(address), this.windowMs);
  }
}

const key = (address: string) => `bad-webhook-signature|${address}`;
