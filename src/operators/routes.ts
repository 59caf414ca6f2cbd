import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { Clock } from '../clock.js';
import type { Database } from '../db/database.js';
import { tooManyRequests } from '../errors.js';
import { bearerToken } from '../http/authenticate.js';
import type { InstallationDirectory } from '../installations/directory.js';
import { type RegistrationMode, registrationMode } from '../installations/registration.js';
import type { OperatorPublicKeys } from '../operator-keys/keys.js';
import * as actions from './actions.js';
import { authenticateOperator, type Operator } from './admin-tokens.js';
import { type Actor, listAudit } from './audit.js';
import { installationDetail, listGrants, listInstallations } from './lookups.js';
import * as schemas from './route-schemas.js';
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
  /** This process's directory of tokens: a disable here forgets the installation before answering. */
  installations: Pick<InstallationDirectory, 'forget'>;
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

/** `/v1/admin/…`: service figures, registration, installations and grants, behind an admin token. */
export async function adminRoutes(server: FastifyInstance, deps: AdminRoutesDeps): Promise<void> {
  const app = server.withTypeProvider<ZodTypeProvider>();
  const { db } = deps.database;

  app.decorateRequest('operator', null as unknown as Operator);
  // Before validation: without a valid admin token, nothing about the request is said.
  app.addHook('preValidation', async (request, reply) => {
    request.operator = await authenticateOperator(deps.operatorKeys, bearerToken(request), deps.issuer, deps.clock.now());
    void reply.header('cache-control', 'no-store');
  });

  /** An operator action's context: its line goes to the request's log. */
  const acting = (request: FastifyRequest): actions.ActionContext => ({ database: deps.database, clock: deps.clock, log: request.log });
  const actor = (request: FastifyRequest): Actor => ({
    operator: request.operator.subject,
    tokenId: request.operator.tokenId,
    source: 'api',
  });

  app.get('/v1/admin/stats', { ...limited, schema: schemas.stats }, async () => serviceStats(db, deps.clock.now(), deps.registrationMode));

  app.get('/v1/admin/registration', { ...limited, schema: schemas.readMode }, async () => ({
    mode: await registrationMode(db, deps.registrationMode),
  }));

  app.put('/v1/admin/registration', { ...limited, schema: schemas.switchMode }, async (request) =>
    actions.switchRegistration(acting(request), actor(request), { mode: request.body.mode, configured: deps.registrationMode }),
  );

  app.post('/v1/admin/installations/:id/disable', { ...limited, schema: schemas.disable }, async (request) => {
    const disabled = await actions.disable(acting(request), actor(request), request.params.id);
    // The other processes hear it announced; this one forgets the token before answering, so the
    // disabled installation's next request here is refused whenever the announcement arrives.
    deps.installations.forget(disabled.installationId);
    return disabled;
  });

  app.post('/v1/admin/installations/:id/enable', { ...limited, schema: schemas.enable }, async (request) =>
    actions.enable(acting(request), actor(request), request.params.id),
  );

  app.post('/v1/admin/grants/:jti/revoke', { ...limited, schema: schemas.revoke }, async (request) =>
    actions.revoke(acting(request), actor(request), request.params.jti),
  );

  app.get('/v1/admin/installations', { ...limited, schema: schemas.installationList() }, async (request) => {
    const { limit, cursor, ...filters } = request.query;
    return listInstallations(deps.database.sql, deps.clock.now(), filters, { limit, cursor });
  });

  app.get('/v1/admin/installations/:id', { ...limited, schema: schemas.installationShow }, async (request) =>
    installationDetail(db, request.params.id, deps.clock.now()),
  );

  app.get('/v1/admin/grants', { ...limited, schema: schemas.grantList() }, async (request) => {
    const { limit, cursor, ...filters } = request.query;
    return listGrants(deps.database.db, deps.clock.now(), filters, { limit, cursor });
  });

  app.get('/v1/admin/audit', { ...limited, schema: schemas.auditList() }, async (request) => {
    const { cursor, ...query } = request.query;
    return listAudit(db, { ...query, before: cursor === undefined ? undefined : Number(cursor) });
  });
}
