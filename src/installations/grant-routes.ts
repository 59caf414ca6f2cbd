import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { Clock } from '../clock.js';
import type { Database } from '../db/database.js';
import { tooManyRequests } from '../errors.js';
import { parseInput } from '../http/validate.js';
import type { GrantVerifier } from '../plans/grants.js';
import { presentGrant } from '../plans/present.js';
import { requireInstallation } from './guard.js';

export interface PlanRoutesDeps {
  database: Database;
  clock: Clock;
  verifyGrant: GrantVerifier;
}

/** A Cloud presents its grant at every start; more than this a minute from one installation is not a Cloud. */
const GRANT_PRESENTATIONS_PER_MINUTE = 30;

/** Large enough for any grant the CLI issues, small enough that nobody parses megabytes of base64. */
const MAX_GRANT_LENGTH = 8192;

const PresentGrantBody = z.object({ grant: z.string().min(1).max(MAX_GRANT_LENGTH) });

export async function planRoutes(app: FastifyInstance, deps: PlanRoutesDeps): Promise<void> {
  const { db, sql } = deps.database;

  app.put(
    '/v1/me/grant',
    {
      preHandler: requireInstallation(sql),
      config: {
        rateLimit: {
          // Counted per installation, after the token check: clients behind one address do not share it.
          hook: 'preHandler',
          keyGenerator: (request: FastifyRequest) => request.installation.id,
          max: GRANT_PRESENTATIONS_PER_MINUTE,
          timeWindow: 60_000,
          errorResponseBuilder: (_request, context) => tooManyRequests('too many grant presentations', context.ttl / 1000),
        },
      },
    },
    async (request) => {
      const { grant: token } = parseInput(PresentGrantBody, request.body, 'body');
      const now = deps.clock.now();
      const grant = await deps.verifyGrant(token, now);
      const answer = await presentGrant(db, grant, request.installation.id, now);
      // The grant's id and subject, never the grant: it is a bearer credential for the plan.
      request.log.info({ installationId: request.installation.id, grantId: grant.jti, cloud: grant.subject }, 'grant presented');
      return answer;
    },
  );
}
