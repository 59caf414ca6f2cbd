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

const REFUSAL_STATUS: Record<ComposioRefusal, number> = {
  invalid: 400,
  conflict: 409,
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
