import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Clock } from '../clock.js';
import type { Database } from '../db/database.js';
import { tooManyRequests } from '../errors.js';
import { bearerToken } from '../http/authenticate.js';
import { json, operatorToken, refusal, refusals, timestamp, uuid } from '../http/responses.js';
import { type RegistrationMode, registrationMode, setRegistrationMode } from '../installations/registration.js';
import type { OperatorPublicKeys } from '../operator-keys/keys.js';
import { revokeGrant } from '../plans/store.js';
import { authenticateOperator, type Operator } from './admin-tokens.js';
import { disableInstallation, enableInstallation } from './disable.js';
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
const RegistrationModeBody = z.strictObject({ mode: z.enum(['open', 'closed']) }).meta({ id: 'RegistrationMode' });

const count = () => z.number().int();
const ServiceStats = z
  .object({
    generatedAt: timestamp(),
    registration: z.enum(['open', 'closed']),
    installations: z.object({
      total: count(),
      disabled: count(),
      byPlan: z.object({ standard: count(), paid: count() }).describe('Enabled installations by the plan they are on now.'),
      activeLastDay: count().describe('Seen in the last 24 hours.'),
    }),
    events: z.object({
      day: z.string().meta({ format: 'date', description: 'The current UTC day.' }),
      keptToday: count(),
      skippedToday: count(),
    }),
    queue: z.object({
      depth: count().describe('Events not yet acknowledged, all installations together.'),
      oldestUnacknowledgedAt: z.string().nullable().meta({ format: 'date-time' }),
      oldestUnacknowledgedAgeSeconds: count().nullable(),
    }),
  })
  .meta({ id: 'ServiceStats' });
const InstallationSwitch = z
  .object({ installationId: uuid(), disabledAt: z.string().nullable().meta({ format: 'date-time' }) })
  .meta({ id: 'InstallationSwitch' });
const Revoked = z.object({ jti: z.string(), revokedAt: timestamp() });

/** What every admin route may answer besides its own. */
const adminRefusals = {
  401: refusals.operatorUnauthorized,
  403: refusals.adminDisabled,
  429: refusals.rateLimited,
};
const installationNotFound = refusal('No installation has this id (`installation_not_found`).');

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

  /** One line per change, naming the operator; tokens stay out of it. */
  const audit = (request: FastifyRequest, action: string, details: Record<string, unknown>) =>
    request.log.info({ operator: request.operator.subject, action, ...details }, 'operator action');

  const stats = {
    tags: ['operators'],
    summary: 'Figures for the whole service',
    security: operatorToken,
    response: {
      200: json("Installations by plan, activity, today's events and the queue.", ServiceStats),
      ...adminRefusals,
    },
  };
  app.get('/v1/admin/stats', { ...limited, schema: stats }, async () => serviceStats(db, deps.clock.now(), deps.registrationMode));

  const readMode = {
    tags: ['operators'],
    summary: 'Whether new installations may register',
    security: operatorToken,
    response: {
      200: json('The registration mode every broker process uses now.', RegistrationModeBody),
      ...adminRefusals,
    },
  };
  app.get('/v1/admin/registration', { ...limited, schema: readMode }, async () => ({
    mode: await registrationMode(db, deps.registrationMode),
  }));

  const switchMode = {
    tags: ['operators'],
    summary: 'Open or close registration',
    description: 'Stored in the database, so every broker process follows at once; it outlasts restarts and `REGISTRATION_MODE`.',
    security: operatorToken,
    body: RegistrationModeBody,
    response: {
      200: json('The new mode.', RegistrationModeBody),
      400: refusals.badRequest,
      ...adminRefusals,
    },
  };
  app.put('/v1/admin/registration', { ...limited, schema: switchMode }, async (request) => {
    const { mode } = request.body;
    await setRegistrationMode(db, mode);
    audit(request, 'registration', { mode });
    return { mode };
  });

  const disable = {
    tags: ['operators'],
    summary: 'Disable an installation',
    description:
      'Its token gets `403 installation_disabled` at once on every installation route and every broker process (not `401`, on which the app would register anew), and its open long-polls end the same way. Enabling restores everything it had. Disabling twice keeps the first time.',
    security: operatorToken,
    params: InstallationParams,
    response: {
      200: json('Disabled.', InstallationSwitch),
      400: refusals.badRequest,
      ...adminRefusals,
      404: installationNotFound,
    },
  };
  app.post('/v1/admin/installations/:id/disable', { ...limited, schema: disable }, async (request) => {
    const { id } = request.params;
    const answer = await disableInstallation(db, id, deps.clock.now());
    audit(request, 'disable', { installationId: id });
    return answer;
  });

  const enable = {
    tags: ['operators'],
    summary: 'Enable an installation again',
    description: 'Its existing token works again.',
    security: operatorToken,
    params: InstallationParams,
    response: {
      200: json('Enabled.', InstallationSwitch),
      400: refusals.badRequest,
      ...adminRefusals,
      404: installationNotFound,
    },
  };
  app.post('/v1/admin/installations/:id/enable', { ...limited, schema: enable }, async (request) => {
    const { id } = request.params;
    const answer = await enableInstallation(db, id);
    audit(request, 'enable', { installationId: id });
    return answer;
  });

  const revoke = {
    tags: ['operators'],
    summary: 'Revoke a grant',
    description:
      'The grant with this `jti` is refused from now on and its holder drops to `standard`. Idempotent, and possible before the grant was ever presented.',
    security: operatorToken,
    params: GrantParams,
    response: {
      200: json('Revoked (now or earlier).', Revoked),
      400: refusals.badRequest,
      ...adminRefusals,
    },
  };
  app.post('/v1/admin/grants/:jti/revoke', { ...limited, schema: revoke }, async (request) => {
    const { jti } = request.params;
    const answer = await revokeGrant(db, jti, deps.clock.now());
    audit(request, 'revoke grant', { grantId: jti });
    return answer;
  });
}
