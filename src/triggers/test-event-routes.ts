import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Clock } from '../clock.js';
import { settingText } from '../config.js';
import type { Database } from '../db/database.js';
import type { QueueRuntime } from '../events/queue/runtime.js';
import { installationToken, json, refusal, refusals } from '../http/responses.js';
import type { InstallationDirectory } from '../installations/directory.js';
import { installationRoute } from '../installations/guard.js';
import { knownTriggerId } from './input.js';
import { queueTriggerTest } from './test-event.js';
import type { TriggerTypeCache } from './types.js';

export interface TriggerTestRoutesDeps {
  database: Database;
  /** Who each token is (the token check of every route here). */
  installations: Pick<InstallationDirectory, 'known' | 'authenticate'>;
  clock: Clock;
  events: Pick<QueueRuntime, 'notifier'>;
  types: Pick<TriggerTypeCache, 'peek'>;
  testsPerDay: number;
}

const IdParams = z.object({ id: z.string().meta({ format: 'uuid' }) });
const TestQueued = z
  .object({
    eventId: z.string().describe('The id of the queued `trigger.test` event.'),
    remainingToday: z.number().int().describe('Test events this installation may still send today (UTC).'),
  })
  .meta({ id: 'TriggerTestQueued' });

/** `POST /v1/triggers/{id}/test`: one test event into the installation's own queue. */
export async function triggerTestRoutes(server: FastifyInstance, deps: TriggerTestRoutesDeps): Promise<void> {
  const app = server.withTypeProvider<ZodTypeProvider>();
  const test = {
    tags: ['triggers'],
    summary: 'Send a test event for a trigger',
    description: `Queues one \`trigger.test\` event for this trigger: the shape of its \`trigger.event\` (same \`triggerId\`, \`automationId\`, \`toolkit\`, \`triggerSlug\`, \`connectedAccountId\`), \`data\` a sample payload of its type, and \`test: true\`. Composio is not called. It wakes a waiting poll like any event, never counts against the quota, and has its own allowance of ${settingText('TRIGGER_TESTS_PER_DAY')} per installation per UTC day; past it, \`429 test_allowance_exceeded\` with \`retry-after\`. Paused triggers and triggers that need a reconnect can be tested too.`,
    security: installationToken,
    params: IdParams,
    response: {
      202: json('Queued.', TestQueued),
      401: refusals.unauthorized,
      403: refusals.installationDisabled,
      404: refusal("No trigger of this installation has this id (`trigger_not_found`), also for another installation's trigger."),
      429: refusal("Today's test events are used up (`test_allowance_exceeded`); see `retry-after`."),
    },
  };
  app.post(
    '/v1/triggers/:id/test',
    {
      ...installationRoute(deps.installations, { checks: [knownTriggerId] }),
      schema: test,
    },
    async (request, reply) => {
      const result = await queueTriggerTest(
        {
          db: deps.database.db,
          types: deps.types,
          notifier: deps.events.notifier,
          testsPerDay: deps.testsPerDay,
        },
        request.installation.id,
        request.params.id.toLowerCase(),
        deps.clock.now(),
      );
      return reply.code(202).send(result);
    },
  );
}
