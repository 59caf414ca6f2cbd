import Fastify, { type FastifyReply, type FastifyRequest } from 'fastify';
import postgres from 'postgres';
import { verifyWebhookSignature } from '../src/composio/webhook-signature.js';
import { EVENTS_CHANNEL } from '../src/events/queue/notifier.js';

/**
 * The baselines bench/events.ts compares the broker with: a plain Fastify server (logging off)
 * doing the same HMAC check on the raw body and answering 200; with `DATABASE_URL`, the ideal
 * durable ingest (the same check, then ONE statement that routes the event by its trigger and
 * inserts it, committed before the answer, on a pool the size of the broker's), and the same
 * announcing each append as the broker must; and holding idle requests the way a long poll
 * does, with nothing else around them.
 */

const secrets = [process.env.COMPOSIO_WEBHOOK_SECRET ?? ''];
const app = Fastify({ logger: false, connectionTimeout: 0, requestTimeout: 0, keepAliveTimeout: 72_000 });
const held = new Set<() => void>();

const sql = process.env.DATABASE_URL ? postgres(process.env.DATABASE_URL, { max: 12, onnotice: () => {} }) : undefined;

app.removeAllContentTypeParsers();
app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: 1024 * 1024 }, (_request, body, done) => done(null, body));

app.get('/health', async () => ({ status: 'ok' }));

function verified(request: FastifyRequest): boolean {
  const header = (name: string) => {
    const value = request.headers[name];
    return typeof value === 'string' ? value : undefined;
  };
  return verifyWebhookSignature({
    id: header('webhook-id'),
    timestamp: header('webhook-timestamp'),
    signatureHeader: header('webhook-signature'),
    rawBody: request.body as Buffer,
    secrets,
    nowSeconds: Math.floor(Date.now() / 1000),
  }).ok;
}

app.post('/v1/webhooks/composio', async (request, reply) => {
  if (!verified(request)) return reply.code(401).send({ error: 'bad signature', code: 'invalid_signature' });
  return { outcome: 'accepted' };
});

/**
 * The ideal ingest: verify, then one INSERT … SELECT that routes by trigger id and stores the
 * event. Announcing, the same statement also announces the installation on the brokers' channel,
 * in the transaction that stores, as every append must so that other processes wake their polls
 * (src/events/queue/notifier.ts): what that costs a store of one event per transaction.
 */
function idealIngest(announcing: boolean) {
  return async (request: FastifyRequest, reply: FastifyReply) => {
    if (!sql) return reply.code(404).send({ error: 'no DATABASE_URL', code: 'not_found' });
    if (!verified(request)) return reply.code(401).send({ error: 'bad signature', code: 'invalid_signature' });
    const event = JSON.parse((request.body as Buffer).toString('utf8')) as { metadata: { trigger_id: string }; data: unknown };
    const store = sql`
      insert into bench_ideal_events (installation_id, position, id, type, trigger_id, automation_id, toolkit, trigger_slug,
                                      connected_account_id, received_at, data)
      select t.installation_id, nextval('bench_ideal_positions'), ${request.headers['webhook-id'] as string}, 'trigger.event',
             t.id, t.automation_id, t.toolkit, t.trigger_slug, t.connected_account_id, now(), ${JSON.stringify(event.data)}::text::jsonb
        from triggers t where t.composio_trigger_id = ${event.metadata.trigger_id}`;
    const stored = announcing
      ? (
          await sql<{ n: number }[]>`
          with stored as (${store} returning installation_id)
          select count(pg_notify(${EVENTS_CHANNEL}, installation_id::text))::int as n from stored`
        )[0]!.n
      : (await store).count;
    return { outcome: stored === 1 ? 'accepted' : 'unknown_trigger' };
  };
}

app.post('/ideal/webhooks/composio', idealIngest(false));
app.post('/ideal-announcing/webhooks/composio', idealIngest(true));

app.get('/hold', (_request, reply) => {
  const answer = () => {
    held.delete(answer);
    clearTimeout(timer);
    void reply.send({ events: [] });
  };
  const timer = setTimeout(answer, 25_000);
  held.add(answer);
});

app.get('/held', async () => ({ held: held.size }));

app.post('/release', async () => {
  const count = held.size;
  for (const answer of [...held]) answer();
  return { released: count };
});

await app.listen({ host: process.env.HOST ?? '127.0.0.1', port: Number(process.env.PORT ?? 0) });
process.on(
  'SIGTERM',
  () =>
    void app.close().then(async () => {
      await sql?.end({ timeout: 2 });
      process.exit(0);
    }),
);
