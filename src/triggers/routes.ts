import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { type Clock, utcDay } from '../clock.js';
import type { ComposioGateway } from '../composio/index.js';
import type { Database } from '../db/database.js';
import { perInstallationLimit } from '../http/installation-limit.js';
import type { InstallationDirectory } from '../installations/directory.js';
import { installationRoute } from '../installations/guard.js';
import { createTrigger, type TriggerDeps } from './create.js';
import { deleteTrigger } from './delete.js';
import { knownTriggerId } from './input.js';
import { getTrigger, listTriggers } from './list.js';
import { rebindTrigger } from './reconnect.js';
import * as schemas from './route-schemas.js';
import { type TriggerTypeCache, toTriggerTypeView } from './types.js';
import { setTriggerEnabled } from './update.js';
import type { TriggerView } from './view.js';

export interface TriggerRoutesDeps {
  database: Database;
  /** Who each token is (the token check of every route here). */
  installations: Pick<InstallationDirectory, 'known' | 'authenticate'>;
  composio: ComposioGateway;
  clock: Clock;
  /** Composio-touching trigger requests (create, pause/resume, delete) per installation per minute. */
  requestsPerMinute: number;
  /** Trigger types per toolkit, shared with the test events (src/triggers/test-event.ts). */
  types: TriggerTypeCache;
}

/** Room for an 8 KB config, a full filter and JSON's escaping of both; anything larger is not a trigger. */
const TRIGGER_BODY_LIMIT = 64 * 1024;

/** `/v1/triggers`: an installation's triggers on its connected accounts. */
export async function triggerRoutes(server: FastifyInstance, deps: TriggerRoutesDeps): Promise<void> {
  const app = server.withTypeProvider<ZodTypeProvider>();
  const domain: TriggerDeps = { db: deps.database.db, composio: deps.composio, types: deps.types, log: app.log };
  const { db } = deps.database;
  const today = () => utcDay(deps.clock.now());
  // Creating, changing and deleting spend the shared Composio budget, so each installation gets a share.
  const composioShare = perInstallationLimit(server, deps.requestsPerMinute, 'too many trigger changes; wait a minute and try again');
  const route = (options: { callsComposio: boolean; byId: boolean }) =>
    installationRoute(deps.installations, {
      ...(options.callsComposio ? { limit: composioShare } : {}),
      ...(options.byId ? { checks: [knownTriggerId] } : {}),
    });
  const triggerId = (request: { params: { id: string } }): string => request.params.id.toLowerCase();

  app.post(
    '/v1/triggers',
    { ...route({ callsComposio: true, byId: false }), bodyLimit: TRIGGER_BODY_LIMIT, schema: schemas.create },
    async (request, reply) => {
      const { trigger, created } = await createTrigger(domain, request.installation, request.body, today());
      return reply.code(created ? 201 : 200).send(trigger);
    },
  );

  app.get('/v1/triggers/types', { ...route({ callsComposio: true, byId: false }), schema: schemas.types }, async (request, reply) => {
    const { toolkit } = request.query;
    const { types: found, ageSeconds } = await deps.types.get(toolkit);
    return reply.header('age', String(ageSeconds)).send({ toolkit, types: found.map(toTriggerTypeView) });
  });

  app.get('/v1/triggers', { ...route({ callsComposio: false, byId: false }), schema: schemas.list }, async (request) =>
    listTriggers(db, request.installation.id, today()),
  );

  app.get('/v1/triggers/:id', { ...route({ callsComposio: false, byId: true }), schema: schemas.one }, async (request) =>
    getTrigger(db, request.installation.id, triggerId(request), today()),
  );

  app.patch(
    '/v1/triggers/:id',
    { ...route({ callsComposio: true, byId: true }), bodyLimit: TRIGGER_BODY_LIMIT, schema: schemas.update },
    async (request) => {
      const { enabled, connectedAccountId } = request.body;
      const id = triggerId(request);
      let trigger: TriggerView | undefined;
      if (connectedAccountId !== undefined) trigger = await rebindTrigger(domain, request.installation, id, connectedAccountId, today());
      if (enabled !== undefined) trigger = await setTriggerEnabled(domain, request.installation.id, id, enabled, today());
      return trigger!;
    },
  );

  app.delete('/v1/triggers/:id', { ...route({ callsComposio: true, byId: true }), schema: schemas.remove }, async (request, reply) => {
    await deleteTrigger(domain, request.installation.id, triggerId(request));
    return reply.code(204).send();
  });
}
