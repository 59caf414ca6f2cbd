import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { Clock } from '../clock.js';
import type { Database } from '../db/database.js';
import { tooManyRequests, unavailable } from '../errors.js';
import { parseInput } from '../http/validate.js';
import type { GrantVerifier } from '../plans/grants.js';
import type { Quotas } from '../plans/plan.js';
import { requireInstallation } from './guard.js';
import { describeInstallation, registerInstallation, type Installation } from './installations.js';
import { registrationMode, type RegistrationMode } from './registration.js';

export interface InstallationRoutesDeps {
  database: Database;
  clock: Clock;
  quotas: Quotas;
  registrationMode: RegistrationMode;
  registrationsPerMinute: number;
  /** Checks a grant presented at registration (signature, claims, expiry) before anything is written. */
  verifyGrant: GrantVerifier;
  /** Called with the installation being removed, before its row goes (Composio clean-up). */
  removeInstallation: (installation: Installation) => Promise<void>;
}

const RegisterBody = z.object({ grant: z.string().min(1).max(8192).optional() });

export async function installationRoutes(app: FastifyInstance, deps: InstallationRoutesDeps): Promise<void> {
  const { db, sql } = deps.database;
  const guard = requireInstallation(sql);

  app.post(
    '/v1/installations',
    {
      config: {
        rateLimit: {
          max: deps.registrationsPerMinute,
          timeWindow: 60_000,
          errorResponseBuilder: (_request, context) =>
            tooManyRequests('too many registration attempts', context.ttl / 1000),
        },
      },
    },
    async (request, reply) => {
      const body = parseInput(RegisterBody, request.body, 'body');
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

  app.get('/v1/me', { preHandler: guard }, async (request) =>
    describeInstallation(db, request.installation, deps.quotas, deps.clock.now()),
  );

  app.delete('/v1/me', { preHandler: guard }, async (request, reply) => {
    await deps.removeInstallation(request.installation);
    request.log.info({ installationId: request.installation.id }, 'installation removed');
    return reply.code(204).send();
  });
}
