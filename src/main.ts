import closeWithGrace from 'close-with-grace';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { buildApp } from './app.js';
import { systemClock } from './clock.js';
import { type ComposioGateway, gatewayForProject } from './composio/index.js';
import { type Config, ConfigError, loadConfig } from './config.js';
import { applyMigrations, type Database, openDatabase } from './db/database.js';
import { type EmbeddedDatabase, freePort, startEmbeddedPostgres } from './db/embedded.js';
import { startRetentionJob } from './events/retention.js';
import { createEventsRuntime } from './events/runtime.js';
import { createLogger } from './logger.js';
import { composioCallRecorder, createMetrics, type Metrics } from './metrics/metrics.js';
import { startMetricsServer } from './metrics/routes.js';
import { startSandbox } from './sim/index.js';

/** config → database → migrations → app → listen, and the reverse on the way out. */
async function main(): Promise<void> {
  let config: Config;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`omb-broker: ${error.message}\n`);
      process.exit(78);
    }
    throw error;
  }
  const logger = createLogger(config.logLevel);
  const metrics = createMetrics();

  let embedded: EmbeddedDatabase | undefined;
  const closers: Array<() => Promise<unknown>> = [];
  const closeAll = async () => {
    for (const close of closers.reverse()) await close().catch((err: unknown) => logger.warn({ err }, 'close failed'));
    closers.length = 0;
  };

  try {
    let databaseUrl = config.databaseUrl;
    if (!databaseUrl) {
      embedded = await startEmbeddedPostgres({ dataDir: config.dataDir, logger });
      closers.push(() => embedded!.stop());
      databaseUrl = embedded.url;
    }
    await applyMigrations(databaseUrl, logger);
    const database = openDatabase({ url: databaseUrl, poolSize: config.databasePoolSize, logger });
    closers.push(() => database.close());

    const composio = await connectComposio(config, logger, metrics, closers, database);
    config = composio.config;

    // app.close() answers waiting polls at once and stops the event listener before the pool closes.
    const events = createEventsRuntime({ database, logger, pollsPerInstallation: config.events.pollsPerInstallation });
    const app = await buildApp({ config, database, logger, clock: systemClock, events, composio: composio.gateway, metrics });
    closers.push(() => closeServer(app, config.shutdownGraceMs, logger));
    if (config.metrics.host !== undefined && config.metrics.port !== undefined) {
      const metricsServer = await startMetricsServer({
        host: config.metrics.host,
        port: config.metrics.port,
        sql: database.sql,
        metrics,
        sources: { longPollsWaiting: () => events.hub.size },
      });
      closers.push(() => closeServer(metricsServer, config.shutdownGraceMs, logger));
      logger.info({ url: `http://${config.metrics.host}:${config.metrics.port}/metrics` }, 'metrics listening');
    }
    const retention = startRetentionJob({ sql: database.sql, clock: systemClock, logger, retentionDays: config.events.retentionDays });
    closers.push(() => retention.stop());

    // The grace period bounds the requests; the margin is for closing the database and Postgres after them.
    closeWithGrace({ delay: config.shutdownGraceMs + CLOSE_MARGIN_MS, logger }, async ({ signal, err }) => {
      if (err) logger.error({ err }, 'shutting down after an error');
      else logger.info({ signal }, 'shutting down');
      await closeAll();
    });

    const url = await app.listen({ port: config.port, host: config.host });
    logger.info({ url, database: embedded ? 'embedded' : 'DATABASE_URL' }, 'broker listening');
  } catch (error) {
    logger.fatal({ err: error }, 'broker failed to start');
    await closeAll();
    process.exit(1);
  }
}

/** After SHUTDOWN_GRACE_MS: time enough to close the pool (5 s at most) and stop the embedded Postgres. */
const CLOSE_MARGIN_MS = 15_000;

/**
 * Stops the HTTP server within `graceMs`. Fastify answers the waiting polls and stops accepting
 * at once, but Node closes only the connections idle at that moment: a keep-alive connection
 * whose request finishes later would hold the close open until its keep-alive timeout. So idle
 * connections are closed as they appear, and whatever still runs at the deadline is cut off,
 * leaving time to close the database and the embedded Postgres properly.
 */
async function closeServer(app: FastifyInstance, graceMs: number, logger: Logger): Promise<void> {
  const closeIdle = setInterval(() => app.server.closeIdleConnections(), 50);
  const deadline = setTimeout(() => {
    logger.warn({ graceMs }, 'requests still running at the end of SHUTDOWN_GRACE_MS; closing their connections');
    app.server.closeAllConnections();
  }, graceMs);
  try {
    await app.close();
  } finally {
    clearInterval(closeIdle);
    clearTimeout(deadline);
  }
}

/**
 * The gateway to Composio: the real project with a key, otherwise sandbox mode — the built-in
 * simulator on its own port, subscribed to deliver signed webhooks to this broker.
 */
async function connectComposio(
  config: Config,
  logger: Logger,
  metrics: Metrics,
  closers: Array<() => Promise<unknown>>,
  database: Database,
): Promise<{ config: Config; gateway: ComposioGateway }> {
  const onCall = composioCallRecorder(metrics);
  // The budget lives in the database: every process on the project draws from the same one.
  const gatewayFor = (c: Config) => gatewayForProject({ ...c.composio, apiKey: c.composio.apiKey! }, logger, onCall, database.sql);
  if (config.composio.apiKey) return { config, gateway: gatewayFor(config) };

  // The simulator must know the broker's webhook URL before the broker listens.
  const port = config.port === 0 ? await freePort() : config.port;
  const host = ['0.0.0.0', '::', ''].includes(config.host) ? '127.0.0.1' : config.host;
  const publicUrl = config.publicUrl ?? `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  const sandbox = await startSandbox({
    logger,
    brokerWebhookUrl: `${publicUrl}/v1/webhooks/composio`,
    ...(config.composio.sandboxPort ? { port: config.composio.sandboxPort } : {}),
  });
  closers.push(() => sandbox.close());
  process.stdout.write(`${sandbox.bannerLines.join('\n')}\n`);
  logger.warn({ simulator: sandbox.baseUrl }, 'sandbox mode: Composio is simulated');
  const sandboxConfig: Config = Object.freeze({
    ...config,
    port,
    composio: Object.freeze({
      ...config.composio,
      apiKey: sandbox.apiKey,
      baseUrl: sandbox.baseUrl,
      webhookSecrets: Object.freeze([sandbox.webhookSecret]),
    }),
  });
  return { config: sandboxConfig, gateway: gatewayFor(sandboxConfig) };
}

await main();
