import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ComposioFailure } from '../composio/index.js';
import { DATABASE_TIMEOUT } from '../db/bounded-pool.js';
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
  // The router's own refusals; their default bodies quote the request path, these never do.
  FST_ERR_BAD_URL: { status: 400, code: 'invalid_url', error: 'the URL is not valid' },
  FST_ERR_MAX_PARAM_LENGTH: { status: 414, code: 'uri_too_long', error: 'a part of the URL is too long' },
  FST_ERR_ASYNC_CONSTRAINT: { status: 500, code: 'internal', error: 'the broker hit an unexpected error; try again' },
};

/**
 * Fastify's `frameworkErrors`: the refusals the router makes before any route runs, as the same
 * `{error, code}` as everything else.
 */
export function frameworkErrors(error: FastifyError, _request: FastifyRequest, reply: FastifyReply): void {
  const known = FRAMEWORK_ERRORS[error.code] ?? { status: 400, code: 'invalid_request', error: 'the request is not valid' };
  void reply.code(known.status).send({ error: known.error, code: known.code });
}

/** What Node's HTTP parser refuses before Fastify sees a request, by the parser's error code. */
const CLIENT_ERRORS: Record<string, { status: number; code: string; error: string }> = {
  ERR_HTTP_REQUEST_TIMEOUT: { status: 408, code: 'request_timeout', error: 'the request did not arrive in time' },
  HPE_HEADER_OVERFLOW: { status: 431, code: 'headers_too_large', error: 'the request headers are too large' },
  HPE_URI_TOO_LONG: { status: 414, code: 'uri_too_long', error: 'the URL is too long' },
};

/**
 * Fastify's `clientErrorHandler`: a request Node could not parse (or that took too long to
 * arrive) gets `{error, code}` like any other refusal, then the connection is closed.
 */
export function clientErrorHandler(error: Error & { code?: string }, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const known = (error.code && CLIENT_ERRORS[error.code]) || { status: 400, code: 'bad_request', error: 'the request could not be read' };
  const body = JSON.stringify({ error: known.error, code: known.code });
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${known.status} ${STATUS_CODES[known.status]}\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(error);
}

/** Errors that mean Postgres cannot serve the request right now (restarting, refusing, connection lost, read-only). */
const DATABASE_UNAVAILABLE = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  // A write on a connection Postgres had just closed (seen while it restarts: a query handed to a
  // connection whose socket was ending).
  'EPIPE',
  // The host of the database not reachable, or its name not resolvable for now (an endpoint
  // being moved during a failover).
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  'CONNECT_TIMEOUT',
  '57P01',
  '57P02',
  '57P03',
  '53300',
  // statement_timeout: Postgres too slow to answer within DATABASE_TIMEOUT_MS.
  '57014',
  // Not done within DATABASE_TIMEOUT_MS of being asked: no free connection, Postgres not back
  // yet, or the statement too slow (db/bounded-pool.ts).
  DATABASE_TIMEOUT,
  // read_only_sql_transaction: this database cannot write now (a standby the endpoint still
  // points to during a failover, or a primary set read-only): another try soon may reach one that can.
  '25006',
]);

/**
 * The one test for "the database is unavailable", looking through wrappers (drizzle's
 * `DrizzleQueryError` carries the driver's error as its `cause`).
 */
export function isDatabaseUnavailable(error: unknown): boolean {
  let current: unknown = error;
  for (let depth = 0; depth < 5 && typeof current === 'object' && current !== null; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && (DATABASE_UNAVAILABLE.has(code) || code.startsWith('08'))) return true;
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}

/** The one place where errors become HTTP answers. */
export function installErrorHandling(app: FastifyInstance): void {
  // While the broker closes, a request that still reaches it (pipelined, or on a busy keep-alive
  // connection) is turned away at once, so the balancer sends it to another replica.
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  // Not an async hook: a promise per request for a check that is false until shutdown.
  app.addHook('onRequest', (_request, reply, done) => {
    if (!closing) return done();
    void reply
      .code(503)
      .header('connection', 'close')
      .header('retry-after', '1')
      .send({ error: 'the broker is shutting down; try again', code: 'shutting_down' });
  });

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
