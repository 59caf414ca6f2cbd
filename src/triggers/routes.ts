import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { utcDay, type Clock } from '../clock.js';
import type { ComposioGateway } from '../composio/index.js';
import type { Database } from '../db/database.js';
import { requireInstallation } from '../installations/guard.js';
import { perInstallationLimit } from '../http/installation-limit.js';
import { parseInput } from '../http/validate.js';
import { createTrigger, type TriggerDeps } from './create.js';
import { deleteTrigger } from './delete.js';
import { triggerNotFound } from './errors.js';
import { CreateTriggerBody, isTriggerId, UpdateTriggerBody } from './input.js';
import { getTrigger, listTriggers } from './list.js';
import { setTriggerEnabled } from './update.js';

export interface TriggerRoutesDeps {
  database: Database;
  composio: ComposioGateway;
  clock: Clock;
  /** Composio-touching trigger requests (create, pause/resume, delete) per installation per minute. */
  requestsPerMinute: number;
}

/** Room for an 8 KB config, a full filter and JSON's escaping of both; anything larger is not a trigger. */
const TRIGGER_BODY_LIMIT = 64 * 1024;

const IdParams = z.object({ id: z.string() });

/** `/v1/triggers`: an installation's triggers on its connected accounts. */
export async function triggerRoutes(app: FastifyInstance, deps: TriggerRoutesDeps): Promise<void> {
  const domain: TriggerDeps = { db: deps.database.db, composio: deps.composio, log: app.log };
  const { db } = deps.database;
  const today = () => utcDay(deps.clock.now());
  // On `onRequest`, before the body is read: a request without a valid token is refused
  // before anything it sent is parsed.
  const authenticated = { onRequest: requireInstallation(deps.database.sql) };
  // Each of these spends the shared Composio budget, so each installation gets a share of it.
  const composioShare = {
    ...authenticated,
    config: perInstallationLimit(deps.requestsPerMinute, 'too many trigger changes; wait a minute and try again'),
  };

  /** The `:id` of the path, or a 404 for anything that cannot be a trigger id. */
  const triggerId = (request: FastifyRequest): string => {
    const { id } = parseInput(IdParams, request.params, 'params');
    if (!isTriggerId(id)) throw triggerNotFound();
    return id.toLowerCase();
  };

  app.post('/v1/triggers', { ...composioShare, bodyLimit: TRIGGER_BODY_LIMIT }, async (request, reply) => {
    const input = parseInput(CreateTriggerBody, request.body, 'body');
    const { trigger, created } = await createTrigger(domain, request.installation, input, today());
    return reply.code(created ? 201 : 200).send(trigger);
  });

  app.get('/v1/triggers', authenticated, async (request) => listTriggers(db, request.installation.id, today()));

  app.get('/v1/triggers/:id', authenticated, async (request) =>
    getTrigger(db, request.installation.id, triggerId(request), today()),
  );

  app.patch('/v1/triggers/:id', { ...composioShare, bodyLimit: TRIGGER_BODY_LIMIT }, async (request) => {
    const id = triggerId(request);
    const { enabled } = parseInput(UpdateTriggerBody, request.body, 'body');
    return setTriggerEnabled(domain, request.installation.id, id, enabled, today());
  });

  app.delete('/v1/triggers/:id', composioShare, async (request, reply) => {
    await deleteTrigger(domain, request.installation.id, triggerId(request));
    return reply.code(204).send();
  });
}
