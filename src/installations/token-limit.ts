import type { FastifyInstance } from 'fastify';
import { bearerToken } from '../http/authenticate.js';
import { type RequestLimit, sharedLimit } from '../http/installation-limit.js';
import { hashToken } from './tokens.js';

/**
 * The same count per installation, decided from the presented token before the token is looked
 * up: a client flooding a route that costs little but the lookup (the check-in) is turned away
 * before each request costs a query. An installation has one token, so this is its count; a
 * request without a token is not counted (it is refused at once, without a query). The key
 * holds the token's hash, never the token.
 */
export function perTokenLimit(app: FastifyInstance, max: number, message: string): RequestLimit {
  return sharedLimit(app, {
    max,
    message,
    stage: 'token',
    key: (request) => {
      const token = bearerToken(request);
      return token === null ? null : `token:${hashToken(token)}`;
    },
  });
}
