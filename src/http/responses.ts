import { z } from 'zod';
import { DEFAULT_EVENT_REQUESTS_PER_MINUTE } from '../config.js';

/**
 * What routes declare about their answers. A response schema is also the serialiser of that
 * answer: fields it does not name never leave the broker.
 */

/** Every refusal: one sentence a person reads, and a code a program reads. */
export const ErrorBody = z
  .object({
    error: z.string().describe('One sentence a person reads in the app.'),
    code: z.string().describe('Stable snake_case code.'),
  })
  .meta({ id: 'Error' });

/** A JSON answer described for the reference. */
export function json<S extends z.ZodType>(description: string, schema: S) {
  return { description, content: { 'application/json': { schema } } };
}

/** An error status, `{error, code}`, described for the reference. */
export const refusal = (description: string) => json(description, ErrorBody);

/** An answer without a body (`204`). */
export const empty = (description: string) => z.undefined().describe(description);

/** A date as the database or the clock wrote it, an ISO string. */
export const timestamp = (description?: string) => z.string().meta({ format: 'date-time', ...(description ? { description } : {}) });

/** A UUID as the database wrote it. */
export const uuid = () => z.string().meta({ format: 'uuid' });

/** Refusals several routes share, with one wording each. */
export const refusals = {
  badRequest: refusal('Malformed JSON, wrong types or a bad field (named in `error`).'),
  unauthorized: refusal('Missing or unknown installation token (and only then): the installation is gone, register again.'),
  installationDisabled: refusal(
    'The service operator disabled this installation (`installation_disabled`). Keep the token and retry later: re-enabling restores everything it had.',
  ),
  tooLarge: refusal('The body is over the size limit.'),
  /** A body that is not `application/json`: one answer for text, forms, multipart and the rest. */
  notJson: refusal('A body that is not `application/json` (`unsupported_media_type`); an empty body is no body, whatever its type.'),
  composioFailed: refusal('Composio is down, slow or refused (`upstream_unavailable`, `upstream_rate_limited`); `error` is readable.'),
  installationRateLimited: refusal('More than the per-installation budget of connected-app requests (120 a minute by default).'),
  installationEventsRateLimited: refusal(
    `More than the per-installation budget of event requests in this broker process (${DEFAULT_EVENT_REQUESTS_PER_MINUTE} a minute by default, \`EVENT_REQUESTS_PER_MINUTE\`).`,
  ),
  rateLimited: refusal('Too many requests from this client; see `retry-after`.'),
  operatorUnauthorized: refusal('Missing, invalid, expired or too long-lived admin token (`operator_unauthorized`).'),
  adminDisabled: refusal('No operator keys are configured, so the admin API is off (`admin_disabled`).'),
  grantRefused: refusal(
    'A genuine grant that cannot be used here: expired (`grant_expired`), revoked (`grant_revoked`), ' +
      'issued for another audience or issuer (`grant_foreign`), not valid yet, for another plan, ' +
      'or the service accepts no grants (`grants_not_accepted`).',
  ),
};

/** The security requirement of every installation route. */
export const installationToken = [{ installationToken: [] }];
/** The security requirement of every admin route. */
export const operatorToken = [{ operatorToken: [] }];

/**
 * Request headers described for the reference only: whatever arrives passes through unchanged
 * (several values, or none), since the route itself decides what a missing one means.
 */
export function describedHeaders(headers: Record<string, { required: boolean; description?: string; schema?: Record<string, unknown> }>) {
  const shape = Object.fromEntries(
    Object.entries(headers).map(([name, { description, schema }]) => [
      name,
      z
        .unknown()
        .meta({ type: 'string', ...schema, ...(description ? { description } : {}) })
        .optional(),
    ]),
  );
  const required = Object.entries(headers)
    .filter(([, header]) => header.required)
    .map(([name]) => name);
  return z.looseObject(shape).meta({ required });
}
