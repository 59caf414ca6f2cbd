import { setImmediate as nextTurn } from 'node:timers/promises';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { describedHeaders, json, refusal, refusals } from '../../http/responses.js';
import { WEBHOOK_OUTCOMES, type WebhookOutcome } from './outcomes.js';
import { receiveWebhook, refuseOverTheLimit, type WebhookDelivery, type WebhookReceiver } from './receive.js';

export interface WebhookRoutesDeps {
  receiver: WebhookReceiver;
}

/** Trigger payloads can be large (a whole e-mail); bigger than the API's JSON limit. */
const WEBHOOK_BODY_LIMIT = 1024 * 1024;
/** Outcomes answered with an error status rather than `200 {outcome}`. */
const REFUSED_OUTCOMES: ReadonlySet<WebhookOutcome> = new Set(['invalid', 'unstorable', 'bad_signature', 'rate_limited']);
const OUTCOMES = WEBHOOK_OUTCOMES.filter((outcome) => !REFUSED_OUTCOMES.has(outcome));

/** The body is the exact bytes that were signed: declared here, read by the handler alone. */
const schema = {
  tags: ['events'],
  summary: "Composio's signed webhooks",
  description:
    "Called by Composio, not by installations. The signature (`webhook-id`, `webhook-timestamp`, `webhook-signature`: HMAC-SHA256 over `id.timestamp.body`, `v1,` base64, several allowed) is checked on the raw body before anything else, against every configured secret, with a 300-second tolerance. `composio.trigger.message` is routed by `metadata.trigger_id`, filtered, counted against the day's quota and queued; `composio.connected_account.expired` marks the account's triggers `needs_reconnect` and queues `connection.expired`; `composio.trigger.disabled` (Composio stopped a trigger by itself) is routed by the trigger id the broker stored, marks the trigger `disabled_by_composio` with Composio's `data.disabled_reason` (`needs_reconnect` for `connection_expired`) and queues `trigger.disabled`, outside the quota. The `webhook-id` is the event id: a redelivery to the same installation within 72 hours is stored once; `webhook-id`s starting `omb:` are kept for the broker's own events and refused. Unknown or paused triggers, duplicates and other event types answer `200` with nothing queued. Addresses sending many bad signatures are refused for a while (`429`).\n\n" +
    "The body is a Composio V3 event, `{id, timestamp, type, metadata, data}`, as UTF-8 JSON of at most 1 MiB. A trigger message's `data` is stored from the delivery's own text, so the app receives every key and number as sent (`__proto__` keys, `1e400`); only NUL and unpaired surrogates, which Postgres cannot hold, become U+FFFD.",
  headers: describedHeaders({
    'webhook-id': { required: true, schema: { maxLength: 255 } },
    'webhook-timestamp': { required: true, schema: { pattern: '^[0-9]+$' } },
    'webhook-signature': { required: true },
  }),
  response: {
    // Listed, not enforced: an outcome the list misses must not turn a handled webhook into a 500.
    200: json('Handled; `outcome` says what became of it.', z.object({ outcome: z.string().meta({ enum: OUTCOMES }) })),
    400: refusal(
      'Correctly signed but not UTF-8 (`invalid_utf8`), not JSON, nested more than 64 levels (`json_too_deep`), or an unusable `webhook-id` (not printable ASCII, over 255 characters, or starting `omb:`).',
    ),
    401: refusal('Missing, stale or wrong signature (`invalid_signature`); nothing is stored.'),
    413: refusals.tooLarge,
    422: refusal(
      'Correctly signed JSON whose `data` holds numbers that cannot be stored as sent (`data_not_storable`): beyond what Postgres stores (131072 digits before the decimal point, 16383 after), or over 1 MiB once written out without exponents, as the app would receive them. Refused rather than rounded; nothing is stored.',
    ),
    429: refusals.rateLimited,
  },
};

/**
 * `POST /v1/webhooks/composio`, in a plugin of its own so its body arrives as the exact bytes
 * that were signed. Everything past reading the request is `receiveWebhook`'s.
 */
export async function webhookRoutes(app: FastifyInstance, { receiver }: WebhookRoutesDeps): Promise<void> {
  app.addHook('onReady', async () => receiver.start());
  app.addHook('onClose', async () => receiver.stop());

  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));

  app.post(
    '/v1/webhooks/composio',
    {
      schema,
      bodyLimit: WEBHOOK_BODY_LIMIT,
      onRequest: async (request) => refuseOverTheLimit(receiver, request.ip),
    },
    async (request) => {
      // Read now: once the connection is gone its socket no longer knows the peer's address.
      const delivery: WebhookDelivery = {
        id: header(request, 'webhook-id'),
        timestamp: header(request, 'webhook-timestamp'),
        signature: signatureHeader(request),
        rawBody: Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0),
        ip: request.ip,
      };
      // The delivery's own work (the signature, parsing, sealing) waits until the event loop has
      // read everything that arrived with it: an ingest batch's commit read in the same turn is
      // answered, and the next batch sent, before the work of the webhooks that arrived beside
      // it (under load some thirty, a few milliseconds), so Postgres waits less between batches
      // (docs/benchmarks.md, bench:events). Arrival order is kept.
      await nextTurn();
      return receiveWebhook(receiver, delivery, request.log);
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
