import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Clock } from '../clock.js';
import type { Database } from '../db/database.js';
import { perInstallationLimit } from '../http/installation-limit.js';
import { installationToken, json, refusal, refusals, timestamp } from '../http/responses.js';
import type { GrantVerifier } from '../plans/grants.js';
import { presentGrant } from '../plans/present.js';
import type { InstallationDirectory } from './directory.js';
import { installationRoute } from './guard.js';

export interface PlanRoutesDeps {
  database: Database;
  /** Who each token is (the token check of every route here). */
  installations: Pick<InstallationDirectory, 'known' | 'authenticate'>;
  clock: Clock;
  verifyGrant: GrantVerifier;
}

/** A Cloud presents its grant at every start; more than this a minute from one installation is not a Cloud. */
const GRANT_PRESENTATIONS_PER_MINUTE = 30;

/** Large enough for any grant the CLI issues, small enough that nobody parses megabytes of base64. */
const MAX_GRANT_LENGTH = 8192;

const PresentGrantBody = z
  .object({
    grant: z
      .string()
      .min(1)
      .max(MAX_GRANT_LENGTH)
      .describe(
        'A compact JWS signed with an operator key: EdDSA (Ed25519), `kid` in the header, claims `sub` (the Cloud), `plan: "paid"`, `aud: "omb-connected-apps"`, `iss`, `iat`, `exp`, `jti`.',
      ),
  })
  .meta({ id: 'Grant' });

const PaidPlan = z.object({ plan: z.literal('paid'), expiresAt: timestamp() });

export async function planRoutes(server: FastifyInstance, deps: PlanRoutesDeps): Promise<void> {
  const app = server.withTypeProvider<ZodTypeProvider>();
  const { db } = deps.database;

  app.put(
    '/v1/me/grant',
    {
      schema: {
        tags: ['plans'],
        summary: 'Present a paid-plan grant',
        description:
          'Binds the grant (by its `jti`) to this installation: the installation that presented a grant last holds it, and the previous holder drops to `standard`. The plan lasts until the grant expires or is revoked. At most 30 presentations a minute per installation.',
        security: installationToken,
        body: PresentGrantBody,
        response: {
          200: json('The installation is on the paid plan.', PaidPlan),
          400: refusal('Bad body, or a grant that cannot be read or verified (`grant_malformed`, `grant_unverifiable`).'),
          401: refusals.unauthorized,
          403: refusal(
            'A genuine grant that cannot be used here (`grant_expired`, `grant_revoked`, `grant_foreign`, `grants_not_accepted`, not valid yet or for another plan), or the operator disabled this installation (`installation_disabled`).',
          ),
          415: refusals.notJson,
          429: refusals.rateLimited,
        },
      },
      // Counted per installation, after the token check: clients behind one address do not share it.
      ...installationRoute(deps.installations, {
        limit: perInstallationLimit(server, GRANT_PRESENTATIONS_PER_MINUTE, 'too many grant presentations'),
      }),
    },
    async (request) => {
      const { grant: token } = request.body;
      const now = deps.clock.now();
      const grant = await deps.verifyGrant(token, now);
      const answer = await presentGrant(db, grant, request.installation.id, now);
      // The grant's id and subject, never the grant: it is a bearer credential for the plan.
      request.log.info({ installationId: request.installation.id, grantId: grant.jti, cloud: grant.subject }, 'grant presented');
      return answer;
    },
  );
}
