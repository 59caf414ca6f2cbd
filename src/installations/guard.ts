import type { FastifyReply, FastifyRequest, preHandlerAsyncHookHandler } from 'fastify';
import { unauthorized } from '../errors.js';
import { bearerToken } from '../http/authenticate.js';
import type { InstallationDirectory } from './directory.js';
import { installationDisabled } from './disable.js';
import type { Installation } from './installations.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by `requireInstallation` on every authenticated route. */
    installation: Installation;
  }
}

/**
 * The pre-handler of every installation route: `401` for a missing or unknown token (and only
 * then), `403 installation_disabled` for a disabled installation's token, `cache-control:
 * no-store` on everything it lets through. Tokens are looked up through the process's
 * directory, which answers from memory for installations it has served before.
 */
export function requireInstallation(directory: Pick<InstallationDirectory, 'authenticate'>): preHandlerAsyncHookHandler {
  return async function installationGuard(request: FastifyRequest, reply: FastifyReply) {
    const token = bearerToken(request);
    const installation = token === null ? null : await directory.authenticate(token);
    if (!installation) throw unauthorized();
    if (installation === 'disabled') throw installationDisabled();
    request.installation = installation;
    void reply.header('cache-control', 'no-store');
  };
}
