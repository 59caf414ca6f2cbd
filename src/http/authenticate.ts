import type { FastifyReply, FastifyRequest, preHandlerAsyncHookHandler } from 'fastify';
import type { Sql } from '../db/database.js';
import { unauthorized } from '../errors.js';
import { authenticate, type Installation } from '../installations/installations.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by `requireInstallation` on every authenticated route. */
    installation: Installation;
  }
}

/** `authorization: Bearer <64 hex>`, any case of `Bearer`, surrounding spaces ignored. */
export function bearerToken(request: FastifyRequest): string | null {
  const header = request.headers.authorization;
  if (typeof header !== 'string') return null;
  const match = /^\s*bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1] ?? null;
}

/**
 * The guard of every installation route, run before its input is validated (on `onRequest` or
 * `preValidation`): `401` for a missing, unknown or disabled token (and only then),
 * `cache-control: no-store` on everything it lets through.
 */
export function requireInstallation(sql: Sql): preHandlerAsyncHookHandler {
  return async function installationGuard(request: FastifyRequest, reply: FastifyReply) {
    const token = bearerToken(request);
    const installation = token === null ? null : await authenticate(sql, token);
    if (!installation) throw unauthorized();
    request.installation = installation;
    void reply.header('cache-control', 'no-store');
  };
}
