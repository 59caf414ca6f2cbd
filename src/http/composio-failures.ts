import type { ComposioFailure, ComposioFailureKind, ComposioRefusal } from '../composio/index.js';
import { AppError } from '../errors.js';

/**
 * What a client sees when Composio fails: the one place that gives a `ComposioFailure` its
 * HTTP status and headers. The code and the sentence are the failure's own.
 */
const STATUS: Record<Exclude<ComposioFailureKind, 'refused'>, number> = {
  not_found: 404,
  // The broker is being limited, not the client: a service-side wait, with `retry-after`.
  rate_limited: 503,
  unavailable: 502,
};

/**
 * Composio's own statuses never reach a client as ours (`400` would say the client's request is
 * malformed, `401`/`403` that its token is bad): what Composio refused with a sentence saying why
 * is `422`, with that sentence.
 */
const REFUSAL_STATUS: Record<ComposioRefusal, number> = {
  invalid: 422,
  conflict: 422,
  // The broker's own finding (the account's sign-in is gone), not Composio's status.
  reconnect_required: 409,
  auth_config_required: 422,
  // Our project key, not the person's app: nothing the client can fix, so a 5xx.
  forbidden: 502,
};

export function composioFailureAnswer(failure: ComposioFailure): AppError {
  const status = failure.kind === 'refused' ? REFUSAL_STATUS[failure.reason ?? 'invalid'] : STATUS[failure.kind];
  const wait = failure.retryAfterSeconds;
  return new AppError(status, failure.code, failure.message, wait === undefined ? {} : { 'retry-after': String(wait) });
}
