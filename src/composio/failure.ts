/**
 * How a call to Composio failed, in the broker's words. Domain code asks `kind` (and `reason`);
 * which HTTP status a client sees is decided at the edge (`src/http/composio-failures.ts`).
 */
export type ComposioFailureKind =
  /** Composio does not know the thing asked about. */
  | 'not_found'
  /** Composio, or the broker's budget for it, says to wait `retryAfterMs`. */
  | 'rate_limited'
  /** Down, slow, unreachable, answering nonsense, or refusing our project key: try again later. */
  | 'unavailable'
  /** Composio understood the request and said no; `reason` says why. */
  | 'refused';

export type ComposioRefusal =
  /** The request itself is wrong (Composio's 400/422), with Composio's sentence. */
  | 'invalid'
  /** It clashes with something Composio already has (a taken alias). */
  | 'conflict'
  /** The app has no Composio-managed sign-in; the owner must bring their own project key. */
  | 'auth_config_required'
  /** The account's sign-in is gone; the person has to reconnect it. */
  | 'reconnect_required'
  /** The project key may not do this (a scoped key); callers may fall back. */
  | 'forbidden';

/** The stable names metrics, logs and clients know these failures by. */
const CODES: Record<Exclude<ComposioFailureKind, 'refused'> | ComposioRefusal, string> = {
  not_found: 'composio_not_found',
  rate_limited: 'upstream_rate_limited',
  unavailable: 'upstream_unavailable',
  invalid: 'composio_rejected',
  conflict: 'composio_conflict',
  auth_config_required: 'auth_config_required',
  reconnect_required: 'reconnect_required',
  forbidden: 'composio_forbidden',
};

export interface FailureDetails {
  /** Required for `refused`. */
  readonly reason?: ComposioRefusal | undefined;
  /** What the call was about, in words: `connected account ca_1`, `Session trs_1`. */
  readonly subject?: string | undefined;
  /** For `rate_limited`: how long to wait before calling again. */
  readonly retryAfterMs?: number | undefined;
}

export class ComposioFailure extends Error {
  readonly kind: ComposioFailureKind;
  readonly reason: ComposioRefusal | undefined;
  readonly subject: string | undefined;
  readonly retryAfterMs: number | undefined;
  /** The stable name (`composio_not_found`, `upstream_rate_limited`, …); decide on `kind`, not on this. */
  readonly code: string;

  /** `message` is the sentence a person reads in the app. */
  constructor(kind: ComposioFailureKind, message: string, details: FailureDetails = {}) {
    super(message);
    this.name = 'ComposioFailure';
    this.kind = kind;
    this.reason = kind === 'refused' ? (details.reason ?? 'invalid') : undefined;
    this.subject = details.subject;
    this.retryAfterMs = kind === 'rate_limited' ? Math.max(0, details.retryAfterMs ?? 0) : undefined;
    this.code = CODES[this.reason ?? (kind as Exclude<ComposioFailureKind, 'refused'>)];
  }

  /** Whole seconds to wait, at least one: what a `retry-after` header and the sentence say. */
  get retryAfterSeconds(): number | undefined {
    return this.retryAfterMs === undefined ? undefined : wholeSeconds(this.retryAfterMs);
  }
}

/** A wait as the client is told it: whole seconds, rounded up, at least one. */
export function wholeSeconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}

/** Whether `error` is Composio failing, optionally in this way (`'refused', 'forbidden'`). */
export function isComposioFailure(error: unknown, kind?: ComposioFailureKind, reason?: ComposioRefusal): error is ComposioFailure {
  if (!(error instanceof ComposioFailure)) return false;
  return (kind === undefined || error.kind === kind) && (reason === undefined || error.reason === reason);
}

/** Composio said the thing asked about does not exist: the one test for it. */
export function isComposioNotFound(error: unknown): boolean {
  return isComposioFailure(error, 'not_found');
}
