import type { FastifyRequest } from 'fastify';

/**
 * `authorization: Bearer <token>`, any case of `Bearer`, surrounding spaces ignored. Which
 * tokens are good is for each feature to say (installations, operators, metrics).
 */
export function bearerToken(request: FastifyRequest): string | null {
  const header = request.headers.authorization;
  if (typeof header !== 'string') return null;
  const match = /^\s*bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1] ?? null;
}
