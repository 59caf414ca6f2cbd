import type { FastifyReply, FastifyRequest, preValidationHookHandler } from 'fastify';
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
 * directory: an installation it has served before is let through at once, from memory.
 */
export function requireInstallation(directory: Pick<InstallationDirectory, 'known' | 'authenticate'>): preValidationHookHandler {
  return function installationGuard(request: FastifyRequest, reply: FastifyReply, done: (error?: Error) => void) {
    const token = bearerToken(request);
    if (token === null) return done(unauthorized());
    const known = directory.known(token);
    if (known) return letIn(request, reply, known, done);
    directory.authenticate(token).then(
      (installation) => {
        if (!installation) done(unauthorized());
        else if (installation === 'disabled') done(installationDisabled());
        else letIn(request, reply, installation, done);
      },
      (error: unknown) => done(error instanceof Error ? error : new Error(String(error))),
    );
  };
}

function letIn(request: FastifyRequest, reply: FastifyReply, installation: Installation, done: () => void): void {
  request.installation = installation;
  void reply.header('cache-control', 'no-store');
  done();
}
