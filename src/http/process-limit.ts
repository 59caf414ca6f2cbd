import { tooManyRequests } from '../errors.js';

const MINUTE_MS = 60_000;

/**
 * A per-minute limit counted in this process's memory, for requests too frequent and too cheap
 * to spend a statement on counting them (a long poll that finds nothing costs none). Windows are
 * the clock's minutes: every count starts again at the top of the minute, so a key gets at most
 * `max` a minute in each process, and across N processes at most N × `max`.
 */
export class PerProcessLimit {
  private minute = 0;
  private counts = new Map<string, number>();

  constructor(
    private readonly max: number,
    private readonly message: string,
  ) {}

  /** Counts a request of `key`; throws `429` (with `retry-after`) past the limit. */
  count(key: string, nowMs = Date.now()): void {
    const minute = Math.floor(nowMs / MINUTE_MS);
    if (minute !== this.minute) {
      // Dropping the whole map at once is what keeps it bounded: only this minute's keys are in it.
      this.minute = minute;
      this.counts = new Map();
    }
    const count = (this.counts.get(key) ?? 0) + 1;
    if (count > this.max) throw tooManyRequests(this.message, ((minute + 1) * MINUTE_MS - nowMs) / 1000);
    this.counts.set(key, count);
  }
}
