import type { FastifyInstance, FastifyReply } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { DEFAULT_POLLS_PER_INSTALLATION, POLL_WAIT_CAP_SECONDS } from '../../config.js';
import type { Database } from '../../db/database.js';
import { unauthorized } from '../../errors.js';
import { perProcessLimit } from '../../http/installation-limit.js';
import { decimal } from '../../http/query.js';
import { quietRequest } from '../../http/request-logger.js';
import { empty, installationToken, json, refusal, refusals } from '../../http/responses.js';
import type { InstallationDirectory } from '../../installations/directory.js';
import { installationRoute } from '../../installations/guard.js';
import { EventSchema, eventJson } from '../event.js';
import type { Sealing } from '../sealing.js';
import { decodeCursor } from './cursor.js';
import { acknowledgeUpTo, type PollAnswer, pollEvents } from './poll.js';
import type { QueueRuntime } from './runtime.js';

export interface EventRoutesDeps {
  database: Database;
  /** Who each token is (the token check of every route here). */
  installations: Pick<InstallationDirectory, 'known' | 'authenticate'>;
  events: QueueRuntime & { readonly sealing?: Sealing | undefined };
  /** The longest a poll may wait (`POLL_MAX_WAIT_SECONDS`), whatever it asks for. */
  pollMaxWaitSeconds: number;
  /** Polls (and, counted apart, acknowledgements) per installation per minute in this process (`EVENT_REQUESTS_PER_MINUTE`). */
  requestsPerMinute: number;
  /** Told how many events each poll answer hands over (for metrics). */
  onDelivered?: (count: number) => void;
}

/** The contract's range for `wait`; the configured maximum may shorten it further. */
const MAX_WAIT_SECONDS = POLL_WAIT_CAP_SECONDS;
const DEFAULT_POLL_LIMIT = 50;

const PollQuery = z.object({
  cursor: z.string().min(1).max(64).optional(),
  limit: decimal(1, 100).default(DEFAULT_POLL_LIMIT).describe(`How many events at most (1–100, decimal; default ${DEFAULT_POLL_LIMIT}).`),
  wait: decimal(0, MAX_WAIT_SECONDS)
    .default(MAX_WAIT_SECONDS)
    .describe(
      `Seconds to wait when nothing is queued (0–${MAX_WAIT_SECONDS}, decimal; default ${MAX_WAIT_SECONDS}; capped by \`POLL_MAX_WAIT_SECONDS\`).`,
    ),
});

const AckBody = z.strictObject({ cursor: z.string().min(1).max(64) });

const EventBatch = z
  .object({
    events: z.array(EventSchema.meta({ id: 'Event' })),
    cursor: z.string().describe('Opaque. Pass it to the next poll to acknowledge these events and read on.'),
    gap: z.literal(true).optional().describe('Present when events after the starting position were already removed by retention.'),
  })
  .meta({ id: 'EventBatch' });

/** `GET /v1/events` */
const poll = {
  tags: ['events'],
  summary: "Long-poll the installation's events",
  description:
    'Events come in the order they were accepted. Passing `cursor` acknowledges every event up to it and reads after it; without `cursor` the poll reads after the last acknowledged event. An older cursor (inside retention) replays. With nothing to return the request waits up to `wait` seconds and answers as soon as an event for this installation is committed, on whichever broker it arrived. On shutdown waiting polls are answered at once with no events (and `connection: close`). A poll ends with `403 installation_disabled` when the installation is disabled while it waits, and with `401` when it is removed (`DELETE /v1/me`).\n\n' +
    `An installation may hold ${DEFAULT_POLLS_PER_INSTALLATION} waiting polls (\`POLLS_PER_INSTALLATION\`): a further poll is accepted and the OLDEST waiting one is answered at once with what it has (usually no events, and its cursor), so a client that reconnects without closing its old request is never refused. Polls and acknowledgements are each limited per installation in each broker process (\`EVENT_REQUESTS_PER_MINUTE\`, \`429\` beyond).`,
  security: installationToken,
  querystring: PollQuery,
  response: {
    200: json('The next events (possibly none, after the wait).', EventBatch),
    400: refusal(
      'A bad `limit` or `wait` (plain decimal integers only), or a cursor this installation was not given or past its queue (`invalid_cursor`).',
    ),
    401: refusals.unauthorized,
    403: refusals.installationDisabled,
    429: refusals.installationEventsRateLimited,
  },
};

/** `POST /v1/events/ack` */
const ack = {
  tags: ['events'],
  summary: 'Acknowledge events without polling',
  security: installationToken,
  body: AckBody,
  response: {
    204: empty('Everything up to the cursor is acknowledged (an older cursor changes nothing).'),
    400: refusal('A missing or bad cursor (`invalid_cursor`).'),
    401: refusals.unauthorized,
    403: refusals.installationDisabled,
    415: refusals.notJson,
    429: refusals.installationEventsRateLimited,
  },
};

/** The installation's queue: long poll and acknowledge. */
export async function eventRoutes(server: FastifyInstance, deps: EventRoutesDeps): Promise<void> {
  const app = server.withTypeProvider<ZodTypeProvider>();
  const { sql } = deps.database;
  const { events } = deps;

  // The LISTEN connection is open before the first poll is accepted; at shutdown waiting polls
  // are answered before the server waits for in-flight requests, and listening stops before
  // the database pool closes.
  app.addHook('onReady', async () => events.start());
  app.addHook('preClose', async () => events.closeAll());
  app.addHook('onClose', async () => events.stop());

  // Neither route calls Composio.
  const config = { composioCalls: false as const };
  // Counted in this process's memory, after the token check: an idle poll costs no statement.
  const message = 'too many event requests for this installation';
  const polls = installationRoute(deps.installations, { limit: perProcessLimit(deps.requestsPerMinute, message) });
  const acks = installationRoute(deps.installations, { limit: perProcessLimit(deps.requestsPerMinute, message) });
  const pollDeps = { sql, hub: events.hub, knowledge: events.knowledge, ...(events.sealing ? { sealing: events.sealing } : {}) };
  // Not an async function, and answered through `reply.send`: a held poll is the poll's object,
  // its timer and the two callbacks here, with no promise or suspended frame around them.
  app.get('/v1/events', { ...polls, schema: poll, config }, (request, reply) => {
    const { query } = request;
    const held = pollEvents(
      pollDeps,
      {
        installationId: request.installation.id,
        cursor: query.cursor,
        limit: query.limit,
        waitMs: Math.min(query.wait, deps.pollMaxWaitSeconds) * 1000,
      },
      (error, result) => {
        // An Error sent goes through the error handler, as if the handler had thrown it.
        if (error || !result) return void (reply as FastifyReply).send(error);
        if (result.shuttingDown) void reply.header('connection', 'close');
        if (result.answer.events.length > 0) deps.onDelivered?.(result.answer.events.length);
        else quietRequest(request);
        // Sent as the JSON text it already is, past the schema's serialiser (see pollAnswerJson).
        void (reply as FastifyReply).type('application/json; charset=utf-8').send(pollAnswerJson(result.answer));
      },
    );
    // The response's `close` comes before the answer when the client hangs up: stop waiting then.
    // (No `off`: the response is this request's alone, and a `close` after the answer changes nothing.)
    reply.raw.on('close', () => {
      if (!reply.raw.writableEnded) held.hangUp();
    });
    // A client that hung up while its token was being checked has no `close` left to send.
    if (request.raw.socket.destroyed) held.hangUp();
  });

  app.post('/v1/events/ack', { ...acks, schema: ack, config }, async (request, reply) => {
    const { cursor } = request.body;
    const installationId = request.installation.id;
    if (!(await acknowledgeUpTo(pollDeps, installationId, decodeCursor(installationId, cursor)))) throw unauthorized();
    return reply.code(204).send();
  });
}

/** A poll's answer as JSON text, in the shape `EventBatch` declares (each event: `eventJson`). */
function pollAnswerJson(answer: PollAnswer): string {
  const events = answer.events.map(eventJson).join(',');
  return `{"events":[${events}],"cursor":${JSON.stringify(answer.cursor)}${answer.gap ? ',"gap":true' : ''}}`;
}
