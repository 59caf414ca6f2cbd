import { timingSafeEqual } from 'node:crypto';
import Fastify, { type FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { Db, Sql } from '../db/database.js';
import { AppError } from '../errors.js';
import { oldestUnacknowledgedAge, queueBacklog } from '../events/queue/queue.js';
import { bearerToken } from '../http/authenticate.js';
import { listenOn } from '../http/listen.js';
import { refusal } from '../http/responses.js';
import { countActiveTriggers } from '../triggers/store.js';
import type { Metrics } from './metrics.js';

export interface MetricsSources {
  /** Long-polls this process holds now. */
  longPollsWaiting: () => number;
  /** Installations whose token this process knows now. */
  knownInstallations: () => number;
}

/** Gauges read when scraped: queue depth and the oldest unacknowledged event, from Postgres. */
async function refreshQueueGauges(sql: Sql, metrics: Metrics): Promise<void> {
  const backlog = await queueBacklog(sql);
  metrics.queueDepth.set(backlog.depth);
  metrics.oldestUnacknowledgedAge.set(oldestUnacknowledgedAge(backlog, new Date()) ?? 0);
}

/** The pool both ways: the queue's backlog is a postgres.js read, the triggers a store's. */
interface MetricsDatabase {
  readonly sql: Sql;
  readonly db: Db;
}

/**
 * The figures as of now. A database that does not answer still gets a scrape: `omb_database_up`
 * says 0 (what the alert watches) and the database gauges keep their last values.
 */
async function scrape(database: MetricsDatabase, metrics: Metrics, sources: MetricsSources): Promise<string> {
  metrics.longPollsWaiting.set(sources.longPollsWaiting());
  metrics.knownInstallations.set(sources.knownInstallations());
  try {
    await Promise.all([refreshQueueGauges(database.sql, metrics), refreshTriggerGauge(database.db, metrics)]);
    metrics.databaseUp.set(1);
  } catch {
    metrics.databaseUp.set(0);
  }
  return metrics.registry.metrics();
}

async function refreshTriggerGauge(db: Db, metrics: Metrics): Promise<void> {
  metrics.triggersActive.set(await countActiveTriggers(db));
}

function sameSecret(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * `/metrics` on the public app, for scrapers holding `METRICS_TOKEN`. Without a token it is
 * refused: the figures are then only on the separate metrics address, when one is configured.
 */
export async function metricsRoutes(
  app: FastifyInstance,
  deps: MetricsDatabase & { metrics: Metrics; token: string | undefined; sources: MetricsSources },
): Promise<void> {
  const schema = {
    tags: ['service'],
    summary: 'Prometheus figures',
    description:
      'Not public: served here only to a scraper with `authorization: Bearer <METRICS_TOKEN>`, and without a token only on the separate `METRICS_HOST:METRICS_PORT` address.',
    response: {
      200: {
        description:
          'Request durations, webhooks by outcome, events queued and delivered, long-polls waiting, Composio calls, queue depth and the oldest unacknowledged event.',
        content: { 'text/plain': { schema: z.string() } },
      },
      401: refusal('Missing or wrong metrics token.'),
      403: refusal('No METRICS_TOKEN is configured, so metrics are not served on this address (`metrics_disabled`).'),
    },
  };
  app.get('/metrics', { schema }, async (request, reply) => {
    const token = bearerToken(request);
    if (!deps.token)
      throw new AppError(403, 'metrics_disabled', 'metrics are not served here; set METRICS_TOKEN or METRICS_HOST/METRICS_PORT');
    if (!token || !sameSecret(token, deps.token)) throw new AppError(401, 'unauthorized', 'missing or invalid metrics token');
    return reply
      .header('cache-control', 'no-store')
      .type(deps.metrics.registry.contentType)
      .send(await scrape(deps, deps.metrics, deps.sources));
  });
}

/** A bare server for `/metrics` alone, on its own (private) address. */
export async function startMetricsServer(
  options: MetricsDatabase & {
    host: string;
    port: number;
    metrics: Metrics;
    sources: MetricsSources;
  },
): Promise<FastifyInstance> {
  const server = Fastify({ logger: false });
  server.get('/metrics', async (_request, reply) =>
    reply.type(options.metrics.registry.contentType).send(await scrape(options, options.metrics, options.sources)),
  );
  await listenOn(server, { host: options.host, port: options.port, settings: { port: 'METRICS_PORT', host: 'METRICS_HOST' } });
  return server;
}
