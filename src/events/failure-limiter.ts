/**
 * Counts failures per source address in fixed one-minute windows, so a flood of badly signed
 * webhooks is refused before any body is read or any HMAC computed. Successes are not counted:
 * Composio's own traffic is never limited. Per process, and bounded in memory: at most
 * `maxTracked` addresses per window are remembered.
 */
export class FailureLimiter {
  private windowStart = 0;
  private failures = new Map<string, number>();

  constructor(
    private readonly perWindow: number,
    private readonly windowMs = 60_000,
    private readonly maxTracked = 100_000,
  ) {}

  /** Seconds until `address` may try again, or 0 when it may now. */
  retryAfterSeconds(address: string, nowMs: number): number {
    this.roll(nowMs);
    if ((this.failures.get(address) ?? 0) < this.perWindow) return 0;
    return Math.max(1, Math.ceil((this.windowStart + this.windowMs - nowMs) / 1000));
  }

  recordFailure(address: string, nowMs: number): void {
    this.roll(nowMs);
    const count = this.failures.get(address);
    if (count === undefined && this.failures.size >= this.maxTracked) return;
    this.failures.set(address, (count ?? 0) + 1);
  }

  private roll(nowMs: number): void {
    const windowStart = nowMs - (nowMs % this.windowMs);
    if (windowStart === this.windowStart) return;
    this.windowStart = windowStart;
    this.failures = new Map();
  }
}
