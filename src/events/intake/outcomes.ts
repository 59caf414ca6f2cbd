/** What became of one incoming webhook; metrics count these. */
export const WEBHOOK_OUTCOMES = [
  /** Queued (a `trigger.event`, `connection.expired` or `trigger.disabled`). */
  'accepted',
  /** A redelivery of an event already queued. */
  'duplicate',
  'unknown_trigger',
  'paused',
  /** Did not match its trigger's filter: dropped, not counted against the quota. */
  'filtered',
  /** Over the installation's daily quota: skipped and counted on its trigger. */
  'over_quota',
  /** The trigger's installation is not the Composio user the message names. */
  'user_mismatch',
  /**
   * Composio's stop of a trigger already shown stopped (`composio.trigger.disabled` after the
   * account's expiry already made it `needs_reconnect`): nothing queued twice for one cause.
   */
  'already_known',
  /** An expired account the broker stored for no installation (no trigger of ours is on it). */
  'unknown_account',
  /** A Composio event type or payload version the broker does not route. */
  'ignored',
  /** Signed correctly but not JSON: not UTF-8, not parsable, or nested too deep. */
  'invalid',
  /** Signed JSON whose `data` cannot be stored as sent (numbers beyond Postgres's numeric, or megabytes once written out): refused, not rounded. */
  'unstorable',
  'bad_signature',
  /** Refused unread: too many bad signatures from this address. */
  'rate_limited',
] as const;

export type WebhookOutcome = (typeof WEBHOOK_OUTCOMES)[number];

/** Running totals per outcome, plus a hook for whoever exports metrics. */
export class WebhookOutcomeCounter {
  private readonly counts = new Map<WebhookOutcome, number>(WEBHOOK_OUTCOMES.map((o) => [o, 0]));
  private readonly listeners = new Set<(outcome: WebhookOutcome) => void>();

  count(outcome: WebhookOutcome): void {
    this.counts.set(outcome, (this.counts.get(outcome) ?? 0) + 1);
    for (const listener of this.listeners) listener(outcome);
  }

  totals(): Record<WebhookOutcome, number> {
    return Object.fromEntries(this.counts) as Record<WebhookOutcome, number>;
  }

  /** Calls `listener` with every outcome from now on; returns the way to stop. */
  subscribe(listener: (outcome: WebhookOutcome) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}
