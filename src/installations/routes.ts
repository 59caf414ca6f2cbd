import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Clock } from '../clock.js';
import { settingText } from '../config.js';
import type { Database } from '../db/database.js';
import { tooManyRequests, unavailable } from '../errors.js';
import { empty, installationToken, json, refusal, refusals, timestamp, uuid } from '../http/responses.js';
import type { GrantVerifier } from '../plans/grants.js';
import type { Quotas } from '../plans/plan.js';
import type { InstallationDirectory } from './directory.js';
import { installationRoute } from './guard.js';
import { describeInstallation, type Installation, registerInstallation } from './installations.js';
import { type RegistrationMode, registrationMode } from './registration.js';
import { perTokenLimit } from './token-limit.js';

export interface InstallationRoutesDeps {
  database: Database;
  /** Who each token is (the token check of every route here). */
  installations: Pick<InstallationDirectory, 'known' | 'authenticate'>;
  clock: Clock;
  quotas: Quotas;
  registrationMode: RegistrationMode;
  registrationsPerMinute: number;
  /** `GET /v1/me` per installation token per minute, counted before the token is looked up. */
  checkInsPerMinute: number;
  /** Checks a grant presented at registration (signature, claims, expiry) before anything is written. */
  verifyGrant: GrantVerifier;
  /** Called with the installation being removed, before its row goes (Composio clean-up). */
  removeInstallation: (installation: Installation) => Promise<void>;
}

const RegisterBody = z.object({
  grant: z.string().min(1).max(8192).optional().describe('A compact JWS grant signed by an operator key.'),
});

const Registered = z.object({ installationId: uuid(), token: z.string().meta({ pattern: '^[0-9a-f]{64}$' }) });

const Me = z
  .object({
    installationId: uuid(),
    plan: z.enum(['standard', 'paid']),
    quota: z.object({
      eventsPerDay: z.number().int(),
      keptToday: z.number().int(),
      skippedToday: z.number().int(),
      resetsAt: timestamp('The next UTC midnight.'),
    }),
    createdAt: timestamp(),
  })
  .meta({ id: 'Me' });

/** `POST /v1/installations` */
const registration = {
  tags: ['installations'],
  summary: 'Register an installation',
  description: `Rate-limited per client address: ${settingText('REGISTRATIONS_PER_MINUTE')} a minute. A Cloud on a paid plan may present its grant here.`,
  body: RegisterBody,
  response: {
    201: json('Registered. The token is shown once and never again.', Registered),
    400: refusal(
      'Bad JSON or field, or a grant that cannot be read or verified (`grant_malformed`, `grant_unverifiable`). Nothing is written.',
    ),
    403: refusals.grantRefused,
    413: refusals.tooLarge,
    415: refusals.notJson,
    429: refusal('Too many registration attempts from this client.'),
    503: refusal('Registration is temporarily closed.'),
  },
};

/** `GET /v1/me` */
const checkIn = {
  tags: ['installations'],
  summary: 'Check in',
  description:
    'Called at every start. Only a 401 means the token is gone; `403 installation_disabled` means the operator disabled the installation: keep the token and retry later.',
  security: installationToken,
  response: {
    200: json("The installation, its plan and today's quota.", Me),
    401: refusals.unauthorized,
    403: refusals.installationDisabled,
    429: refusal(
      `More check-ins with this token than ${settingText('CHECK_INS_PER_MINUTE')}; the app checks in at each start: keep the token and retry after \`retry-after\`.`,
    ),
    503: refusal('The database is not reachable (`database_unavailable`): keep the token and retry after `retry-after`.'),
  },
};

/** `DELETE /v1/me` */
const removal = {
  tags: ['installations'],
  summary: 'Remove the installation',
  description: 'Removes its triggers on Composio, revokes its connected accounts and drops its queued events.',
  security: installationToken,
  response: {
    204: empty('Removed.'),
    401: refusals.unauthorized,
    403: refusals.installationDisabled,
    502: refusals.composioFailed,
  },
};

export async function installationRoutes(server: FastifyInstance, deps: InstallationRoutesDeps): Promise<void> {
  const app = server.withTypeProvider<ZodTypeProvider>();
  const { db } = deps.database;

  app.post(
    '/v1/installations',
    {
      schema: registration,
      config: {
        rateLimit: {
          max: deps.registrationsPerMinute,
          timeWindow: 60_000,
          errorResponseBuilder: (_request, context) => tooManyRequests('too many registration attempts', context.ttl / 1000),
        },
      },
    },
    async (request, reply) => {
      const { body } = request;
      if ((await registrationMode(db, deps.registrationMode)) === 'closed') {
        throw unavailable('registration is temporarily closed', 'registration_closed');
      }
      const now = deps.clock.now();
      const grant = body.grant === undefined ? undefined : await deps.verifyGrant(body.grant, now);
      const registered = await registerInstallation(db, grant && { grant, now });
      request.log.info({ installationId: registered.installationId, grantId: grant?.jti }, 'installation registered');
      return reply.code(201).header('cache-control', 'no-store').send(registered);
    },
  );

  app.get(
    '/v1/me',
    {
      // Counted by the presented token before it is looked up: a disabled installation's app,
      // retrying its check-in, is turned away without a query.
      ...installationRoute(deps.installations, {
        limit: perTokenLimit(server, deps.checkInsPerMinute, 'too many check-ins with this token; retry after a minute'),
      }),
      schema: checkIn,
    },
    async (request) => describeInstallation(db, request.installation, deps.quotas, deps.clock.now()),
  );

  app.delete('/v1/me', { ...installationRoute(deps.installations), schema: removal }, async (request, reply) => {
    await deps.removeInstallation(request.installation);
    request.log.info({ installationId: request.installation.id }, 'installation removed');
    return reply.code(204).send();
  });
}
