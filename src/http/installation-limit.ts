import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { tooManyRequests } from '../errors.js';
import { PerProcessLimit } from './process-limit.js';

/**
 * An installation route's request limit, as `installationRoute` (installations/guard.ts) takes it:
 * one hook, which that declaration places by its `stage`:
 * - `token`: before the token check, counted by the presented token, so a client flooding a route
 *   is turned away before its token costs a lookup;
 * - `installation`: per installation, after the token check, once the body is read (a limit may
 *   look at it) and before it is validated.
 */
export interface RequestLimit {
  readonly stage: 'token' | 'installation';
  /** A callback hook, not an async one: the per-process count of an idle poll makes no promise. */
  readonly hook: (request: FastifyRequest, reply: FastifyReply, done: (error?: Error) => void) => void;
}

/** The key of a request that is not counted (no key could start with it). */
const UNCOUNTED = '';

/**
 * At most `max` requests a minute per key and route, counted in Postgres so that every broker
 * process shares the count (through `@fastify/rate-limit` and `http/rate-limit-store.ts`), refused
 * `429` with `message` and `retry-after`. `key` says whose count a request is; a request it
 * answers `null` for is not counted. Each route counts apart: the stored key starts with the
 * route (`GET /v1/me|token:…`), as the plugin's per-route counts always have.
 */
export function sharedLimit(
  app: FastifyInstance,
  options: { max: number; message: string; stage: RequestLimit['stage']; key: (request: FastifyRequest) => string | null },
): RequestLimit {
  const hook = app.rateLimit({
    max: options.max,
    timeWindow: 60_000,
    keyGenerator: (request: FastifyRequest) => {
      const key = options.key(request);
      return key === null ? UNCOUNTED : `${request.routeOptions.method} ${request.routeOptions.url}|${key}`;
    },
    allowList: (_request: FastifyRequest, key: string) => key === UNCOUNTED,
    errorResponseBuilder: (_request: FastifyRequest, context: { ttl: number }) => tooManyRequests(options.message, context.ttl / 1000),
  });
  return {
    stage: options.stage,
    hook: (request, reply, done) => {
      hook.call(app, request, reply).then(() => done(), done);
    },
  };
}

/**
 * Counted per installation once the token check has said who is calling. Routes that spend the
 * shared Composio budget use it, so each installation gets a share. `uncounted` leaves some
 * requests out (by their body: MCP notifications and pings).
 */
export function perInstallationLimit(
  app: FastifyInstance,
  max: number,
  message: string,
  uncounted?: (request: FastifyRequest) => boolean,
): RequestLimit {
  return sharedLimit(app, {
    max,
    message,
    stage: 'installation',
    key: (request) => (uncounted?.(request) ? null : `installation:${calling(request)}`),
  });
}

/**
 * Counted per installation in this process's memory (`PerProcessLimit`): for requests too frequent
 * and too cheap to spend a statement on counting them, the long poll and its acknowledgement.
 */
export function perProcessLimit(max: number, message: string): RequestLimit {
  const limit = new PerProcessLimit(max, message);
  return {
    stage: 'installation',
    hook: (request, _reply, done) => {
      try {
        limit.count(calling(request));
      } catch (error) {
        return done(error as Error);
      }
      done();
    },
  };
}

/** The installation the token check let in; a limit declared to count after it and placed before it is a wiring error, loudly. */
function calling(request: FastifyRequest): string {
  const installation = request.installation as FastifyRequest['installation'] | undefined;
  if (installation === undefined) throw new Error(`${request.routeOptions.url}: a per-installation limit ran before the token check`);
  return installation.id;
}
