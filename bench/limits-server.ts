import rateLimit from '@fastify/rate-limit';
import Fastify from 'fastify';
import postgres from 'postgres';
import { sharedCounters } from '../src/db/counters.js';
import { sharedRateLimitStore } from '../src/http/rate-limit-store.js';

/**
 * The limiter alone, for bench/limits.ts: a plain Fastify server (logging off) whose
 * `GET /counted` is limited per `x-installation` by `@fastify/rate-limit`, with the broker's
 * shared Postgres store (`LIMIT_STORE=shared`, `DATABASE_URL`) or the plugin's in-memory one
 * (`LIMIT_STORE=memory`, what the broker used before), and whose `GET /plain` is not limited.
 */

const shared = process.env.LIMIT_STORE === 'shared';
const sql = shared ? postgres(process.env.DATABASE_URL ?? '', { max: 12, onnotice: () => {} }) : undefined;
const app = Fastify({ logger: false, keepAliveTimeout: 72_000 });
await app.register(rateLimit, { global: false, ...(sql ? { store: sharedRateLimitStore(sharedCounters(sql)) } : {}) });

app.get('/health', async () => ({ status: 'ok' }));
app.get('/plain', async () => ({ ok: true }));
app.get(
  '/counted',
  {
    config: {
      rateLimit: { max: 1_000_000_000, timeWindow: 60_000, keyGenerator: (request) => `installation:${request.headers['x-installation']}` },
    },
  },
  async () => ({ ok: true }),
);

await app.listen({ host: process.env.HOST ?? '127.0.0.1', port: Number(process.env.PORT ?? 0) });
process.once('SIGTERM', () => {
  void app
    .close()
    .then(() => sql?.end({ timeout: 1 }))
    .finally(() => process.exit(0));
});
