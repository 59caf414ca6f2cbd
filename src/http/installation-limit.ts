import type { FastifyRequest } from 'fastify';
import { tooManyRequests } from '../errors.js';

/**
 * Route config for `@fastify/rate-limit` counting per installation rather than per address:
 * it runs before validation, after `requireInstallation` has said who is calling. Routes that
 * spend the shared Composio budget use it, so each installation gets a share.
 */
export function perInstallationLimit(max: number, message: string) {
  return {
    rateLimit: {
      hook: 'preValidation' as const,
      max,
      timeWindow: 60_000,
      keyGenerator: (request: FastifyRequest) => `installation:${request.installation.id}`,
      errorResponseBuilder: (_request: FastifyRequest, context: { ttl: number }) => tooManyRequests(message, context.ttl / 1000),
    },
  };
}
