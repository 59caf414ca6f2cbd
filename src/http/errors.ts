import type { FastifyError, FastifyInstance } from 'fastify';
import { ComposioFailure } from '../composio/index.js';
import { AppError } from '../errors.js';
import { composioFailureAnswer } from './composio-failures.js';

/** Fastify's own error codes for bad requests, as the `{error, code}` a client reads. */
const FRAMEWORK_ERRORS: Record<string, { status: number; code: string; error: string }> = {
  FST_ERR_CTP_BODY_TOO_LARGE: { status: 413, code: 'payload_too_large', error: 'request body is too large' },
  FST_ERR_CTP_INVALID_MEDIA_TYPE: {
    status: 415,
    code: 'unsupported_media_type',
    error: 'content-type must be application/json',
  },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: {
    status: 400,
    code: 'invalid_request',
    error: 'content-length does not match the body',
  },
  FST_ERR_CTP_EMPTY_JSON_BODY: { status: 400, code: 'invalid_json', error: 'body is empty; send a JSON object such as {}' },
  FST_ERR_CTP_INVALID_JSON_BODY: { status: 400, code: 'invalid_json', error: 'body is not valid JSON' },
  FST_ERR_CTP_INVALID_TYPE: { status: 400, code: 'invalid_request', error: 'content-type header is invalid' },
};

/** Errors that mean Postgres is unreachable right now (restarting, refusing, connection lost). */
const DATABASE_UNAVAILABLE = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  'CONNECT_TIMEOUT',
  '57P01',
  '57P02',
  '57P03',
  '53300',
]);

export function isDatabaseUnavailable(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && (DATABASE_UNAVAILABLE.has(code) || code.startsWith('08'));
}

/** The one place where errors become HTTP answers. */
export function installErrorHandling(app: FastifyInstance): void {
  app.setNotFoundHandler((_request, reply) => {
    void reply.code(404).send({ error: 'not found', code: 'not_found' });
  });

  app.setErrorHandler((error: FastifyError | AppError, request, reply) => {
    // The client hung up (its stream or its upstream call ended with it): nobody is left to answer.
    if (request.raw.socket?.destroyed || reply.raw.destroyed) {
      request.log.info({ code: (error as { code?: unknown }).code }, 'client went away before the answer');
      return;
    }
    if (error instanceof ComposioFailure) error = composioFailureAnswer(error);
    if (error instanceof AppError) {
      if (error.status >= 500) request.log.warn({ code: error.code, msg: error.message }, 'request failed');
      void reply.code(error.status).headers(error.headers).send({ error: error.message, code: error.code });
      return;
    }
    const known = error.code ? FRAMEWORK_ERRORS[error.code] : undefined;
    if (known) {
      void reply.code(known.status).send({ error: known.error, code: known.code });
      return;
    }
    if (error instanceof SyntaxError || error.statusCode === 400) {
      void reply.code(400).send({ error: 'body is not valid JSON', code: 'invalid_json' });
      return;
    }
    if (error.statusCode === 429) {
      void reply.code(429).send({ error: error.message, code: 'rate_limited' });
      return;
    }
    if (error.statusCode && error.statusCode >= 400 && error.statusCode < 500) {
      void reply.code(error.statusCode).send({ error: error.message, code: 'invalid_request' });
      return;
    }
    if (isDatabaseUnavailable(error)) {
      request.log.warn({ code: error.code }, 'database unavailable');
      void reply
        .code(503)
        .header('retry-after', '2')
        .send({ error: 'the broker cannot reach its database right now; try again shortly', code: 'database_unavailable' });
      return;
    }
    request.log.error({ err: error }, 'unexpected error');
    void reply.code(500).send({ error: 'the broker hit an unexpected error; try again', code: 'internal' });
  });
}
