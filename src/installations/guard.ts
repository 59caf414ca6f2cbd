import type { FastifyReply, FastifyRequest, onRequestHookHandler, preValidationAsyncHookHandler, preValidationHookHandler } from 'fastify';
import { unauthorized } from '../errors.js';
import { bearerToken } from '../http/authenticate.js';
import type { RequestLimit } from '../http/installation-limit.js';
import type { InstallationDirectory } from './directory.js';
import { installationDisabled } from './disable.js';
import type { Installation } from './installations.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by `requireInstallation` on every authenticated route. */
    installation: Installation;
  }
}

type Directory = Pick<InstallationDirectory, 'known' | 'authenticate'>;

/**
 * How every installation route is declared, its hooks in one order:
 * 1. the token check (`requireInstallation`), at `onRequest`: before the body is read, so nothing
 *    a caller without a valid token sent is parsed;
 * 2. the route's limit (`http/installation-limit.ts`), by its stage: right before the check (counted
 *    by the presented token), or per installation once the body is read, before it is validated;
 * 3. the route's own `checks`, then, still before validation: an id that cannot be one is the same
 *    `404` as another installation's, not a `400` for its body; a limited client hears `429` first.
 */
export function installationRoute(
  directory: Directory,
  options: { limit?: RequestLimit; checks?: ((request: FastifyRequest) => Promise<void>)[] } = {},
): { onRequest: onRequestHookHandler[]; preValidation?: (preValidationHookHandler | preValidationAsyncHookHandler)[] } {
  const guard = requireInstallation(directory);
  const { limit, checks } = options;
  const onRequest = limit?.stage === 'token' ? [limit.hook, guard] : [guard];
  const preValidation = [...(limit?.stage === 'installation' ? [limit.hook] : []), ...(checks ?? [])];
  return preValidation.length === 0 ? { onRequest } : { onRequest, preValidation };
}

/**
 * The token check of every installation route: `401` for a missing or unknown token (and only
 * then), `403 installation_disabled` for a disabled installation's token, `cache-control:
 * no-store` on everything it lets through. Tokens are looked up through the process's
 * directory: an installation it has served before is let through at once, from memory.
 */
function requireInstallation(directory: Directory): onRequestHookHandler {
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
