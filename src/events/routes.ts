import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { Database } from '../db/database.js';
import { unauthorized } from '../errors.js';
import { requireInstallation } from '../installations/guard.js';
import { parseInput } from '../http/validate.js';
import { decodeCursor } from './cursor.js';
import { pollEvents } from './poll.js';
import { acknowledge } from './queue.js';
import type { EventsRuntime } from './runtime.js';

export interface EventRoutesDeps {
  database: Database;
  events: EventsRuntime;
  /** The longest a poll may wait (`POLL_MAX_WAIT_SECONDS`), whatever it asks for. */
  pollMaxWaitSeconds: number;
  /** Told how many events each poll answer hands over (for metrics). */
  onDelivered?: (count: number) => void;
}

/** The contract's range for `wait`; the configured maximum may shorten it further. */
const MAX_WAIT_SECONDS = 25;
export const DEFAULT_POLL_LIMIT = 50;

const PollQuery = z.object({
  cursor: z.string().min(1).max(64).optional(),
  limit: z.coerce.number().int().min(1).max(100).default(DEFAULT_POLL_LIMIT),
  wait: z.coerce.number().int().min(0).max(MAX_WAIT_SECONDS).default(MAX_WAIT_SECONDS),
});

const AckBody = z.strictObject({ cursor: z.string().min(1).max(64) });

/** The installation's queue: long poll and acknowledge. */
export async function eventRoutes(app: FastifyInstance, deps: EventRoutesDeps): Promise<void> {
  const { sql } = deps.database;
  const { events } = deps;
  const guard = requireInstallation(sql);

  // The LISTEN connection is open before the first poll is accepted; at shutdown waiting polls
  // are answered before the server waits for in-flight requests, and listening stops before
  // the database pool closes.
  app.addHook('onReady', async () => events.start());
  app.addHook('preClose', async () => events.closeAll());
  app.addHook('onClose', async () => events.stop());

  app.get('/v1/events', { preHandler: guard }, async (request, reply) => {
    const query = parseInput(PollQuery, request.query, 'query');
    // The response's `close` fires when the client hangs up before the answer: stop waiting then.
    const clientGone = new AbortController();
    const onClose = () => {
      if (!reply.raw.writableEnded) clientGone.abort();
    };
    reply.raw.once('close', onClose);
    // A client that hung up while its token was being checked has no `close` left to send.
    if (request.raw.socket.destroyed) clientGone.abort();
    try {
      const { answer, shuttingDown } = await pollEvents(
        { sql, hub: events.hub },
        {
          installationId: request.installation.id,
          cursor: query.cursor,
          limit: query.limit,
          waitMs: Math.min(query.wait, deps.pollMaxWaitSeconds) * 1000,
          signal: clientGone.signal,
        },
      );
      if (shuttingDown) void reply.header('connection', 'close');
      if (answer.events.length > 0) deps.onDelivered?.(answer.events.length);
      return answer;
    } finally {
      reply.raw.off('close', onClose);
    }
  });

  app.post('/v1/events/ack', { preHandler: guard }, async (request, reply) => {
    const { cursor } = parseInput(AckBody, request.body, 'body');
    const installationId = request.installation.id;
    if (!(await acknowledge(sql, installationId, decodeCursor(installationId, cursor)))) throw unauthorized();
    return reply.code(204).send();
  });
}
