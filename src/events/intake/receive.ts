import type { Logger } from 'pino';
import type { Clock } from '../../clock.js';
import { parseWebhookEvent } from '../../composio/webhook-events.js';
import { verifyWebhookSignature } from '../../composio/webhook-signature.js';
import type { SharedCounters } from '../../db/counters.js';
import type { Database } from '../../db/database.js';
import { AppError, badRequest, tooManyRequests } from '../../errors.js';
import { tooDeep } from '../../http/json.js';
import { excessiveNesting, utf8Text } from '../../http/json-limits.js';
import type { Quotas } from '../../plans/plan.js';
import { BROKER_EVENT_ID_PREFIX } from '../broker-events.js';
import type { QueueRuntime } from '../queue/runtime.js';
import type { Sealing } from '../sealing.js';
import { FailureLimiter } from './failure-limiter.js';
import { type IngestDeps, ingestWebhookEvent } from './ingest.js';
import type { WebhookOutcome, WebhookOutcomeCounter } from './outcomes.js';
import type { IntakeRuntime } from './runtime.js';
import { WebhookSecretBook } from './webhook-secrets.js';

/** One delivery as it arrived: the three signature headers and the exact bytes that were signed. */
export interface WebhookDelivery {
  readonly id: string | undefined;
  readonly timestamp: string | undefined;
  /** Several `webhook-signature` headers, joined by spaces. */
  readonly signature: string | undefined;
  readonly rawBody: Buffer;
  /** The sender's address, for the bad-signature limit. */
  readonly ip: string;
}

export interface WebhookReceiverDeps {
  readonly clock: Clock;
  readonly book: WebhookSecretBook;
  readonly limiter: FailureLimiter;
  readonly outcomes: WebhookOutcomeCounter;
  readonly ingest: IngestDeps;
}

/** A process's receiver, put together once: its accepted secrets are read at `start` and kept current until `stop`. */
export interface WebhookReceiver extends WebhookReceiverDeps {
  start(): Promise<void>;
  stop(): void;
}

export function createWebhookReceiver(options: {
  database: Database;
  clock: Clock;
  quotas: Quotas;
  events: IntakeRuntime & Pick<QueueRuntime, 'notifier'> & { readonly sealing?: Sealing | undefined };
  /** `COMPOSIO_WEBHOOK_SECRET`: accepted besides the stored ones (webhook-secrets.ts). */
  secrets: readonly string[];
  badWebhooksPerMinute: number;
  /** Where bad signatures are counted, shared by every broker process. */
  counters: SharedCounters;
  logger: Logger;
}): WebhookReceiver {
  const { clock, events } = options;
  const book = new WebhookSecretBook(
    options.database.db,
    options.secrets,
    options.logger.child({ component: 'webhook-secrets' }),
    events.sealing,
  );
  let stopWatching = () => {};
  let stopSealingWatch = (): unknown => undefined;
  return {
    clock,
    book,
    limiter: new FailureLimiter(options.counters, options.badWebhooksPerMinute, 60_000, () => clock.now().getTime()),
    outcomes: events.outcomes,
    ingest: {
      database: options.database,
      quotas: options.quotas,
      batcher: events.batcher,
      notifier: events.notifier,
      ...(events.sealing ? { sealing: events.sealing } : {}),
    },
    async start() {
      stopWatching = events.onWebhookSecretsChanged(() => void book.reload());
      // Once this process seals, a read of the secrets encrypts those in clear.
      stopSealingWatch = events.sealing?.onStarted(() => void book.reload()) ?? (() => {});
      await book.start();
    },
    stop() {
      stopWatching();
      stopSealingWatch();
      book.stop();
    },
  };
}

const SIGNATURE_TOLERANCE_SECONDS = 300;
/**
 * `webhook-id` becomes the event id: printable and short, and not starting as the broker's own
 * ids do (src/events/broker-events.ts): refusing those here keeps the two id spaces apart, so a
 * webhook is never taken for a duplicate of a broker-made event, nor one of those for a webhook.
 */
const usableEventId = (id: string) => /^[\x21-\x7e]{1,255}$/.test(id) && !id.startsWith(BROKER_EVENT_ID_PREFIX);
/** Routine outcomes a busy trigger can produce thousands of times a day: logged at debug. */
const QUIET_OUTCOMES: ReadonlySet<WebhookOutcome> = new Set(['paused', 'filtered', 'over_quota']);

/**
 * What becomes of one Composio webhook: the signature is checked on the raw bytes before
 * anything else, then the event is parsed and ingested. Every outcome is counted once; refusals
 * are thrown as `AppError`s (`401`, `400`, `429`). Never calls Composio.
 */
export async function receiveWebhook(
  deps: WebhookReceiverDeps,
  delivery: WebhookDelivery,
  log: Pick<Logger, 'warn' | 'info' | 'debug'>,
): Promise<{ outcome: WebhookOutcome }> {
  const { clock, book, limiter, outcomes } = deps;
  const receivedAt = clock.now();
  const verify = (secrets: readonly string[]) =>
    verifyWebhookSignature({
      id: delivery.id,
      timestamp: delivery.timestamp,
      signatureHeader: delivery.signature,
      rawBody: delivery.rawBody,
      secrets,
      nowSeconds: Math.floor(receivedAt.getTime() / 1000),
      toleranceSeconds: SIGNATURE_TOLERANCE_SECONDS,
    });
  let verdict = verify(book.accepted(receivedAt));
  // Perhaps signed with a secret this process has not heard of yet (a rotation): read them
  // again, and during a rotation wait for the new one, rather than refuse a genuine delivery.
  if (!verdict.ok && verdict.reason === 'bad_signature') verdict = await book.recheck(verdict, verify, () => clock.now());
  if (!verdict.ok) {
    const retryAfter = await limiter.recordFailure(delivery.ip);
    if (retryAfter > 0) throw overTheLimit(outcomes, retryAfter);
    outcomes.count('bad_signature');
    log.warn({ reason: verdict.reason, ip: delivery.ip }, 'webhook refused: bad signature');
    throw new AppError(401, 'invalid_signature', 'webhook signature is missing or invalid');
  }
  // Signed by Composio from here on.
  const eventId = delivery.id;
  if (eventId === undefined || !usableEventId(eventId)) throw badRequest('webhook-id is not a usable event id');

  // JSON is UTF-8, and the signature covers the bytes: a body that is not UTF-8 is refused, never
  // read with U+FFFD in place of what Composio sent.
  const text = utf8Text(delivery.rawBody);
  if (text === undefined) {
    outcomes.count('invalid');
    throw badRequest('body is not valid UTF-8', 'invalid_utf8');
  }
  // Before parsing: storing the payload walks it recursively.
  const nested = excessiveNesting(text);
  if (nested) {
    outcomes.count('invalid');
    throw tooDeep(nested.field === undefined ? 'body' : `body.${nested.field}`);
  }
  const parsed = parseWebhookEvent(text);
  if (!parsed.ok) {
    if (parsed.reason === 'invalid_json') {
      outcomes.count('invalid');
      throw badRequest('body is not valid JSON', 'invalid_json');
    }
    // A payload version we do not read: answering an error would only make Composio retry it.
    outcomes.count('ignored');
    log.warn({ eventId }, 'webhook ignored: payload not in the V3 shape');
    return { outcome: 'ignored' };
  }

  const result = await ingestWebhookEvent(deps.ingest, { eventId, event: parsed.event, payloadJson: text, receivedAt });
  outcomes.count(result.outcome);
  if (result.outcome === 'unstorable') {
    log.warn({ eventId }, 'webhook refused: its data cannot be stored as sent');
    throw new AppError(
      422,
      'data_not_storable',
      'data holds numbers that cannot be stored as sent: beyond 131072 digits before the decimal point or 16383 after, or over 1 MiB written out in full',
    );
  }
  const line = { eventId, outcome: result.outcome, installationId: result.installationId ?? undefined };
  if (result.outcome === 'user_mismatch') log.warn(line, 'webhook not queued: the Composio user does not own the trigger');
  else if (parsed.event.type === 'other') log.debug({ ...line, type: parsed.event.eventType }, 'webhook ignored');
  else if (QUIET_OUTCOMES.has(result.outcome)) log.debug(line, 'webhook not queued');
  else if (result.outcome !== 'accepted') log.info(line, 'webhook not queued');
  return { outcome: result.outcome };
}

/** Before the body is read: an address over the bad-signature limit is turned away cheaply. */
export function refuseOverTheLimit(deps: Pick<WebhookReceiverDeps, 'limiter' | 'outcomes'>, ip: string): void {
  const retryAfter = deps.limiter.retryAfterSeconds(ip);
  if (retryAfter > 0) throw overTheLimit(deps.outcomes, retryAfter);
}

/** An address over the bad-signature limit, counted as such. */
function overTheLimit(outcomes: WebhookOutcomeCounter, retryAfter: number): AppError {
  outcomes.count('rate_limited');
  return tooManyRequests('too many webhooks with bad signatures from this address', retryAfter);
}
