import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { Clock } from '../clock.js';
import { parseWebhookEvent } from '../composio/webhook-events.js';
import { verifyWebhookSignature } from '../composio/webhook-signature.js';
import type { SharedCounters } from '../db/counters.js';
import type { Database } from '../db/database.js';
import { AppError, badRequest, tooManyRequests } from '../errors.js';
import { tooDeep } from '../http/json.js';
import { excessiveNesting } from '../http/json-limits.js';
import { describedHeaders, json, refusal, refusals } from '../http/responses.js';
import type { Quotas } from '../plans/plan.js';
import { FailureLimiter } from './failure-limiter.js';
import { ingestWebhookEvent } from './ingest.js';
import { WEBHOOK_OUTCOMES, type WebhookOutcome } from './outcomes.js';
import type { QueuedEventType } from './queue.js';
import type { EventsRuntime } from './runtime.js';
import { WebhookSecretBook } from './webhook-secrets.js';

export interface WebhookRoutesDeps {
  database: Database;
  clock: Clock;
  quotas: Quotas;
  events: EventsRuntime;
  /** `COMPOSIO_WEBHOOK_SECRET`: accepted besides the stored ones (src/events/webhook-secrets.ts). */
  secrets: readonly string[];
  badWebhooksPerMinute: number;
  /** Where bad signatures are counted, shared by every broker process. */
  counters: SharedCounters;
  /** Told the type of every event appended to a queue (for metrics). */
  onQueued?: (type: QueuedEventType) => void;
}

export type { QueuedEventType } from './queue.js';

/** Trigger payloads can be large (a whole e-mail); bigger than the API's JSON limit. */
const WEBHOOK_BODY_LIMIT = 1024 * 1024;
const SIGNATURE_TOLERANCE_SECONDS = 300;
/**
 * `webhook-id` becomes the event id: printable and short. Ids starting `omb:` are the broker's
 * own (`quota.exceeded`): refusing them here keeps the two id spaces apart, so a webhook is
 * never taken for a duplicate of a broker-made event, nor one of those for a webhook.
 */
const EVENT_ID_PATTERN = /^(?!omb:)[\x21-\x7e]{1,255}$/;
/** Routine outcomes a busy trigger can produce thousands of times a day: logged at debug. */
const QUIET_OUTCOMES: ReadonlySet<WebhookOutcome> = new Set(['paused', 'filtered', 'over_quota']);

/** Outcomes answered with an error status rather than `200 {outcome}`. */
const REFUSED_OUTCOMES: ReadonlySet<WebhookOutcome> = new Set(['invalid', 'bad_signature', 'rate_limited']);
const OUTCOMES = WEBHOOK_OUTCOMES.filter((outcome) => !REFUSED_OUTCOMES.has(outcome));

/** The body is the exact bytes that were signed: declared here, read by the handler alone. */
const schema = {
  tags: ['events'],
  summary: "Composio's signed webhooks",
  description:
    "Called by Composio, not by installations. The signature (`webhook-id`, `webhook-timestamp`, `webhook-signature`: HMAC-SHA256 over `id.timestamp.body`, `v1,` base64, several allowed) is checked on the raw body before anything else, against every configured secret, with a 300-second tolerance. `composio.trigger.message` is routed by `metadata.trigger_id`, filtered, counted against the day's quota and queued; `composio.connected_account.expired` marks the account's triggers `needs_reconnect` and queues `connection.expired`. The `webhook-id` is the event id: a redelivery to the same installation within 72 hours is stored once; `webhook-id`s starting `omb:` are kept for the broker's own events and refused. Unknown or paused triggers, duplicates and other event types answer `200` with nothing queued. Addresses sending many bad signatures are refused for a while (`429`).\n\n" +
    'The body is a Composio V3 event, `{id, timestamp, type, metadata, data}`, as JSON of at most 1 MiB.',
  headers: describedHeaders({
    'webhook-id': { required: true, schema: { maxLength: 255 } },
    'webhook-timestamp': { required: true, schema: { pattern: '^[0-9]+$' } },
    'webhook-signature': { required: true },
  }),
  response: {
    // Listed, not enforced: an outcome the list misses must not turn a handled webhook into a 500.
    200: json('Handled; `outcome` says what became of it.', z.object({ outcome: z.string().meta({ enum: OUTCOMES }) })),
    400: refusal(
      'Correctly signed but not JSON, nested more than 64 levels (`json_too_deep`), or an unusable `webhook-id` (not printable ASCII, over 255 characters, or starting `omb:`).',
    ),
    401: refusal('Missing, stale or wrong signature (`invalid_signature`); nothing is stored.'),
    413: refusals.tooLarge,
    429: refusals.rateLimited,
  },
};

/**
 * `POST /v1/webhooks/composio`, in a plugin of its own so its body arrives as the exact bytes
 * that were signed. The signature is checked before anything else; nothing on this path calls
 * Composio.
 */
export async function webhookRoutes(app: FastifyInstance, deps: WebhookRoutesDeps): Promise<void> {
  const { clock, events } = deps;
  const limiter = new FailureLimiter(deps.counters, deps.badWebhooksPerMinute, 60_000, () => clock.now().getTime());
  const count = (outcome: WebhookOutcome) => events.outcomes.count(outcome);
  /** An address over the bad-signature limit, counted as such. */
  const overTheLimit = (retryAfter: number) => {
    count('rate_limited');
    return tooManyRequests('too many webhooks with bad signatures from this address', retryAfter);
  };
  const book = new WebhookSecretBook(deps.database.sql, deps.secrets, app.log.child({ component: 'webhook-secrets' }));
  const stopWatching = events.onWebhookSecretsChanged(() => void book.reload());
  app.addHook('onReady', async () => book.start());
  app.addHook('onClose', async () => {
    stopWatching();
    book.stop();
  });

  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));

  app.post(
    '/v1/webhooks/composio',
    {
      schema,
      bodyLimit: WEBHOOK_BODY_LIMIT,
      // Before the body is read: an address sending bad signatures is turned away cheaply.
      onRequest: async (request) => {
        const retryAfter = limiter.retryAfterSeconds(request.ip);
        if (retryAfter > 0) throw overTheLimit(retryAfter);
      },
    },
    async (request) => {
      const receivedAt = clock.now();
      const rawBody = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
      const eventId = header(request, 'webhook-id');
      const verify = (secrets: string[]) =>
        verifyWebhookSignature({
          id: eventId,
          timestamp: header(request, 'webhook-timestamp'),
          signatureHeader: signatureHeader(request),
          rawBody,
          secrets,
          nowSeconds: Math.floor(receivedAt.getTime() / 1000),
          toleranceSeconds: SIGNATURE_TOLERANCE_SECONDS,
        });
      let verdict = verify(book.accepted(receivedAt));
      // Perhaps signed with a secret this process has not heard of yet (a rotation): read them
      // again, and during a rotation wait for the new one, rather than refuse a genuine delivery.
      if (!verdict.ok && verdict.reason === 'bad_signature') verdict = await book.recheck(verdict, verify, () => clock.now());
      if (!verdict.ok) {
        const retryAfter = await limiter.recordFailure(request.ip);
        if (retryAfter > 0) throw overTheLimit(retryAfter);
        count('bad_signature');
        request.log.warn({ reason: verdict.reason, ip: request.ip }, 'webhook refused: bad signature');
        throw new AppError(401, 'invalid_signature', 'webhook signature is missing or invalid');
      }
      // Signed by Composio from here on.
      if (!EVENT_ID_PATTERN.test(eventId!)) throw badRequest('webhook-id is not a usable event id');

      // Before parsing: storing the payload walks it recursively.
      const nested = excessiveNesting(rawBody.toString('utf8'));
      if (nested) {
        count('invalid');
        throw tooDeep(nested.field === undefined ? 'body' : `body.${nested.field}`);
      }
      const parsed = parseWebhookEvent(rawBody);
      if (!parsed.ok) {
        if (parsed.reason === 'invalid_json') {
          count('invalid');
          throw badRequest('body is not valid JSON', 'invalid_json');
        }
        // A payload version we do not read: answering an error would only make Composio retry it.
        count('ignored');
        request.log.warn({ eventId }, 'webhook ignored: payload not in the V3 shape');
        return { outcome: 'ignored' };
      }

      const result = await ingestWebhookEvent(
        {
          database: deps.database,
          quotas: deps.quotas,
          batcher: events.batcher,
          notifier: events.notifier,
          onQueued: deps.onQueued,
        },
        { eventId: eventId!, event: parsed.event, receivedAt },
      );
      count(result.outcome);
      const line = { eventId, outcome: result.outcome, installationId: result.installationId ?? undefined };
      if (result.outcome === 'user_mismatch') request.log.warn(line, 'webhook not queued: the Composio user does not own the trigger');
      else if (parsed.event.type === 'other') request.log.debug({ ...line, type: parsed.event.eventType }, 'webhook ignored');
      else if (QUIET_OUTCOMES.has(result.outcome)) request.log.debug(line, 'webhook not queued');
      else if (result.outcome !== 'accepted') request.log.info(line, 'webhook not queued');
      return { outcome: result.outcome };
    },
  );
}

function header(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return typeof value === 'string' ? value : undefined;
}

/** Several `webhook-signature` headers are read as one space-separated list. */
function signatureHeader(request: FastifyRequest): string | undefined {
  const value = request.headers['webhook-signature'];
  return Array.isArray(value) ? value.join(' ') : value;
}
