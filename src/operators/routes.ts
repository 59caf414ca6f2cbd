import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { Clock } from '../clock.js';
import type { Database } from '../db/database.js';
import { tooManyRequests } from '../errors.js';
import { bearerToken } from '../http/authenticate.js';
import { parseInput } from '../http/validate.js';
import { registrationMode, setRegistrationMode, type RegistrationMode } from '../installations/registration.js';
import { revokeGrant } from '../plans/store.js';
import { authenticateOperator, type Operator } from './admin-tokens.js';
import { disableInstallation, enableInstallation } from './disable.js';
import type { OperatorPublicKeys } from '../operator-keys/keys.js';
import { serviceStats } from './stats.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the admin guard on every `/v1/admin/…` route. */
    operator: Operator;
  }
}

export interface AdminRoutesDeps {
  database: Database;
  clock: Clock;
  /** Null when no operator keys are configured: every admin route answers `403`. */
  operatorKeys: OperatorPublicKeys | null;
  issuer: string;
  registrationMode: RegistrationMode;
}

/** Operators click, they do not stream; the limit, per client address, mostly slows down guessing at tokens. */
const limited = {
  config: {
    rateLimit: {
      max: 120,
      timeWindow: 60_000,
      errorResponseBuilder: (_request: FastifyRequest, context: { ttl: number }) =>
        tooManyRequests('too many admin requests', context.ttl / 1000),
    },
  },
};

const InstallationParams = z.object({ id: z.uuid() });
const GrantParams = z.object({ jti: z.string().trim().min(1).max(256) });
const RegistrationBody = z.strictObject({ mode: z.enum(['open', 'closed']) });

/** `/v1/admin/…`: service figures, registration, installations and grants, behind an admin token. */
export async function adminRoutes(app: FastifyInstance, deps: AdminRoutesDeps): Promise<void> {
  const { db } = deps.database;

  app.decorateRequest('operator', null as unknown as Operator);
  app.addHook('preHandler', async (request, reply) => {
    request.operator = await authenticateOperator(deps.operatorKeys, bearerToken(request), deps.issuer, deps.clock.now());
    void reply.header('cache-control', 'no-store');
  });

  /** One line per change, naming the operator; tokens stay out of it. */
  const audit = (request: FastifyRequest, action: string, details: Record<string, unknown>) =>
    request.log.info({ operator: request.operator.subject, action, ...details }, 'operator action');

  app.get('/v1/admin/stats', limited, async () => serviceStats(db, deps.clock.now(), deps.registrationMode));

  app.get('/v1/admin/registration', limited, async () => ({ mode: await registrationMode(db, deps.registrationMode) }));

  app.put('/v1/admin/registration', limited, async (request) => {
    const { mode } = parseInput(RegistrationBody, request.body, 'body');
    await setRegistrationMode(db, mode);
    audit(request, 'registration', { mode });
    return { mode };
  });

  app.post('/v1/admin/installations/:id/disable', limited, async (request) => {
    const { id } = parseInput(InstallationParams, request.params, 'params');
    const answer = await disableInstallation(db, id, deps.clock.now());
    audit(request, 'disable', { installationId: id });
    return answer;
  });

  app.post('/v1/admin/installations/:id/enable', limited, async (request) => {
    const { id } = parseInput(InstallationParams, request.params, 'params');
    const answer = await enableInstallation(db, id);
    audit(request, 'enable', { installationId: id });
    return answer;
  });

  app.post('/v1/admin/grants/:jti/revoke', limited, async (request) => {
    const { jti } = parseInput(GrantParams, request.params, 'params');
    const answer = await revokeGrant(db, jti, deps.clock.now());
    audit(request, 'revoke grant', { grantId: jti });
    return answer;
  });
}
