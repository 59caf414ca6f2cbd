import type { FastifyRequest } from 'fastify';
import { tooManyRequests } from '../errors.js';

/** The key of a request that is not counted (no key could start with it). */
const UNCOUNTED = '';

/**
 * Route config for `@fastify/rate-limit`: at most `max` requests a minute per key, refused
 * `429` with `message` and `retry-after`. `key` says whose count a request is; a request it
 * answers `null` for is not counted. `hook` is when the count is taken: `onRequest` before the
 * request costs anything, `preValidation` once `requireInstallation` has said who is calling.
 */
export function perMinuteLimit(options: {
  max: number;
  message: string;
  hook: 'onRequest' | 'preValidation';
  key: (request: FastifyRequest) => string | null;
}) {
  return {
    rateLimit: {
      hook: options.hook,
      max: options.max,
      timeWindow: 60_000,
      keyGenerator: (request: FastifyRequest) => options.key(request) ?? UNCOUNTED,
      allowList: (_request: FastifyRequest, key: string) => key === UNCOUNTED,
      errorResponseBuilder: (_request: FastifyRequest, context: { ttl: number }) => tooManyRequests(options.message, context.ttl / 1000),
    },
  };
}

/**
 * Counting per installation rather than per address, after `requireInstallation` has said who is
 * calling and before validation. Routes that spend the shared Composio budget use it, so each
 * installation gets a share.
 */
export function perInstallationLimit(max: number, message: string) {
  return perMinuteLimit({ max, message, hook: 'preValidation', key: (request) => `installation:${request.installation.id}` });
}
