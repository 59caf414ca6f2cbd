import Fastify from 'fastify';
import { verifyWebhookSignature } from '../src/composio/webhook-signature.js';

/**
 * The baseline bench/events.ts compares the broker with: a plain Fastify server (logging off)
 * doing the same HMAC check on the raw body and answering 200, and holding idle requests the way
 * a long poll does, with nothing else around them.
 */

const secrets = [process.env.COMPOSIO_WEBHOOK_SECRET ?? ''];
const app = Fastify({ logger: false, connectionTimeout: 0, requestTimeout: 0, keepAliveTimeout: 72_000 });
const held = new Set<() => void>();

app.removeAllContentTypeParsers();
app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: 1024 * 1024 }, (_request, body, done) => done(null, body));

app.get('/health', async () => ({ status: 'ok' }));

app.post('/v1/webhooks/composio', async (request, reply) => {
  const header = (name: string) => {
    const value = request.headers[name];
    return typeof value === 'string' ? value : undefined;
  };
  const verdict = verifyWebhookSignature({
    id: header('webhook-id'),
    timestamp: header('webhook-timestamp'),
    signatureHeader: header('webhook-signature'),
    rawBody: request.body as Buffer,
    secrets,
    nowSeconds: Math.floor(Date.now() / 1000),
  });
  if (!verdict.ok) return reply.code(401).send({ error: 'bad signature', code: 'invalid_signature' });
  return { outcome: 'accepted' };
});

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
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
