import type { Socket } from 'node:net';
import rateLimit from '@fastify/rate-limit';
import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  LogController,
  type preHandlerHookHandler,
} from 'fastify';
import { serializerCompiler } from 'fastify-type-provider-zod';
import type { Logger } from 'pino';
import { z } from 'zod';
import type { Clock } from './clock.js';
import { type ComposioGateway, runAsCaller } from './composio/index.js';
import type { Config } from './config.js';
import { connectorRoutes } from './connectors/routes.js';
import { sharedCounters } from './db/counters.js';
import type { Database } from './db/database.js';
import { apiDocs } from './docs/openapi.js';
import { createWebhookReceiver } from './events/intake/receive.js';
import { webhookRoutes } from './events/intake/webhook-routes.js';
import { eventRoutes } from './events/queue/routes.js';
import { createEventsRuntime, type EventsRuntime } from './events/runtime.js';
import { clientErrorHandler, frameworkErrors, installErrorHandling } from './http/errors.js';
import { parseJsonBodies } from './http/json.js';
import { sharedRateLimitStore } from './http/rate-limit-store.js';
import { requestLogger } from './http/request-logger.js';
import { ErrorBody, json } from './http/responses.js';
import { validatorCompiler } from './http/validate.js';
import { planRoutes } from './installations/grant-routes.js';
import type { Installation } from './installations/installations.js';
import { installationRoutes } from './installations/routes.js';
import { createMetrics, type Metrics } from './metrics/metrics.js';
import { metricsRoutes } from './metrics/routes.js';
import { operatorPublicKeys } from './operator-keys/keys.js';
import { adminRoutes } from './operators/routes.js';
import { createGrantVerifier } from './plans/grants.js';
import { removeInstallation } from './removal/remove-installation.js';
import { signInLinkNoter } from './triggers/reconnect-job.js';
import { triggerRoutes } from './triggers/routes.js';
import { triggerTestRoutes } from './triggers/test-event-routes.js';
import { TriggerTypeCache } from './triggers/types.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Its one request line has been written. */
    logged: boolean;
  }
  interface FastifyContextConfig {
    /**
     * `false` on a route that never calls Composio: its requests get no caller scope (a long poll
     * is held by the thousand and should carry nothing it does not use).
     */
    composioCalls?: false;
  }
}

export interface AppDeps {
  config: Config;
  database: Database;
  logger: Logger;
  clock: Clock;
  /** The one door to Composio (the real project, or the simulator in sandbox mode). */
  composio: ComposioGateway;
  /** Prometheus figures; made here when not given. */
  metrics?: Metrics;
  /** App events' per-process machinery (long-poll waiters, LISTEN, notifier, webhook outcome counts); made here when not given. */
  events?: EventsRuntime;
}

/**
 * Fastify's `trustProxy` for `TRUST_PROXY`: a hop count believes that many `x-forwarded-for`
 * entries from the right (the ones the proxies in front appended), as Fastify does for a number
 * at runtime although its types only declare the function form.
 */
function trustedProxies(trust: Config['trustProxy']): boolean | string[] | ((address: string, hop: number) => boolean) {
  if (typeof trust === 'number') return (_address, hop) => hop < trust;
  return trust === false ? false : [...trust];
}

/** The broker's HTTP surface. No I/O happens here until the app is used. */
export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const { config, database, logger } = deps;
  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    childLoggerFactory: requestLogger,
    bodyLimit: config.limits.bodyLimitBytes,
    trustProxy: trustedProxies(config.trustProxy),
    requestIdHeader: false,
    // Requests arriving while the broker closes get 503, as `{error, code}` (installErrorHandling),
    // not Fastify's own body.
    return503OnClosing: false,
    // `{error, code}` even for what Node's parser and the router refuse, never quoting the path.
    clientErrorHandler,
    frameworkErrors,
    // Answers may take long (25 s polls, minutes-long MCP streams), but a request itself (headers
    // and body) must arrive within REQUEST_TIMEOUT_MS (30 s): a client trickling bytes cannot hold
    // a socket forever. Node checks for late requests every `connectionsCheckingInterval` (30 s
    // by default, which let a trickled body live 60-75 s): checked every second, the cut-off is
    // the one configured, to within a second.
    connectionTimeout: 0,
    requestTimeout: config.requestTimeoutMs,
    http: {
      requestTimeout: config.requestTimeoutMs,
      headersTimeout: config.requestTimeoutMs,
      connectionsCheckingInterval: Math.min(1_000, config.requestTimeoutMs / 4),
    },
    // Longer than the balancers' idle timeout, so they close idle connections first.
    keepAliveTimeout: 72_000,
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 256 },
  });

  app.decorateRequest('installation', null as unknown as Installation);
  app.decorateRequest('quiet', false);
  app.decorateRequest('logged', false);
  const metrics = deps.metrics ?? createMetrics({ defaultMetrics: false });
  // Routes declare zod schemas: input is parsed by them (answering as `parseInput` does), and
  // every answer is written through its schema, so nothing undeclared leaves.
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  installErrorHandling(app);
  parseJsonBodies(app);
  logOneLinePerRequest(app, metrics, logger);
  // Every limit but the event routes' (counted per process, see queue/routes.ts) counts in Postgres,
  // so it holds whatever the number of broker processes.
  const counters = sharedCounters(database.sql);
  await app.register(rateLimit, { global: false, store: sharedRateLimitStore(counters) });
  composioCallsPerRequest(app, config.composio.timeoutMs);
  await apiDocs(app, { publicUrl: config.publicUrl });

  const health = {
    tags: ['service'],
    summary: 'Liveness and database reachability',
    response: {
      200: json('The broker is up and reaches its database.', z.object({ status: z.literal('ok'), database: z.literal('ok') })),
      503: json('The database is not reachable.', ErrorBody),
    },
  };
  // On a connection of its own, bounded to about a second: the answer never waits behind a busy
  // or reconnecting pool.
  app.get('/health', { schema: health }, async (_request, reply) => {
    try {
      await database.ping();
      return { status: 'ok', database: 'ok' };
    } catch {
      return reply.code(503).header('retry-after', '2').send({ error: 'the database is not reachable', code: 'database_unavailable' });
    }
  });

  // A JWKS holding anything but Ed25519 public keys stops the start here, loudly.
  const operatorKeys = operatorPublicKeys(config.operators.publicKeys);
  const verifyGrant = createGrantVerifier(operatorKeys, config.operators.issuer);

  // App events' per-process machinery, which also knows who each token is: every route's token check asks it.
  const events =
    deps.events ?? createEventsRuntime({ database, logger, ...config.events, ...(config.dataKeys ? { dataKeys: config.dataKeys } : {}) });
  const { installations } = events;

  await app.register(installationRoutes, {
    database,
    installations,
    clock: deps.clock,
    quotas: config.quotas,
    registrationMode: config.registrationMode,
    registrationsPerMinute: config.limits.registrationsPerMinute,
    checkInsPerMinute: config.limits.checkInsPerMinute,
    verifyGrant,
    removeInstallation: async (installation) => {
      await removeInstallation(database.db, deps.composio, installation, logger);
      // The other processes hear it announced; this one forgets the token before answering.
      installations.forget(installation.id);
    },
  });

  await app.register(connectorRoutes, {
    database,
    installations,
    composio: deps.composio,
    clock: deps.clock,
    logger,
    requestsPerMinute: config.limits.connectorRequestsPerMinute,
    mcpRequestsPerMinute: config.limits.mcpRequestsPerMinute,
    mcpTimeoutMs: config.composio.mcpTimeoutMs,
    mcpBodyLimitBytes: config.limits.mcpBodyLimitBytes,
    noteSignInLink: signInLinkNoter(database.db, deps.clock),
  });
  // Trigger types per toolkit: discovery and creation read them, test events take their samples.
  const triggerTypes = new TriggerTypeCache(deps.composio, deps.clock, logger);
  await app.register(triggerRoutes, {
    database,
    installations,
    composio: deps.composio,
    clock: deps.clock,
    requestsPerMinute: config.limits.connectorRequestsPerMinute,
    types: triggerTypes,
  });

  const stopCountingWebhooks = events.outcomes.subscribe((outcome) => metrics.webhooks.inc({ outcome }));
  // Every event queued, whichever path queued it (webhooks, test events, the reconciliation's stops).
  const stopCountingQueued = events.notifier.onQueued((type) => metrics.eventsQueued.inc({ type }));
  const stopCountingUnreadable = events.sealing?.onUnreadable(() => metrics.eventsUnreadable.inc());
  app.addHook('onClose', async () => {
    stopCountingWebhooks();
    stopCountingQueued();
    stopCountingUnreadable?.();
  });
  await app.register(metricsRoutes, {
    sql: database.sql,
    db: database.db,
    metrics,
    token: config.metrics.token,
    sources: { longPollsWaiting: () => events.hub.size, knownInstallations: () => events.installations.size },
  });
  await app.register(eventRoutes, {
    database,
    installations,
    events,
    pollMaxWaitSeconds: config.events.pollMaxWaitSeconds,
    requestsPerMinute: config.limits.eventRequestsPerMinute,
    onDelivered: (count) => metrics.eventsDelivered.inc(count),
  });
  const receiver = createWebhookReceiver({
    database,
    clock: deps.clock,
    quotas: config.quotas,
    events,
    secrets: config.composio.webhookSecrets,
    badWebhooksPerMinute: config.limits.badWebhooksPerMinute,
    counters,
    logger,
  });
  await app.register(webhookRoutes, { receiver });
  await app.register(triggerTestRoutes, {
    database,
    installations,
    clock: deps.clock,
    events,
    types: triggerTypes,
    testsPerDay: config.events.testsPerDay,
  });
  await app.register(planRoutes, { database, installations, clock: deps.clock, verifyGrant });
  await app.register(adminRoutes, {
    database,
    installations,
    clock: deps.clock,
    operatorKeys,
    issuer: config.operators.issuer,
    registrationMode: config.registrationMode,
  });

  return app;
}

/**
 * An installation's request makes its Composio calls as that installation (they queue behind its
 * own earlier calls, not behind other installations') and within one deadline for the whole
 * request, `COMPOSIO_TIMEOUT_MS` from the moment it is let in. Runs after the routes' guards;
 * not for routes configured `composioCalls: false`.
 */
function composioCallsPerRequest(app: FastifyInstance, timeoutMs: number): void {
  const scope: preHandlerHookHandler = (request, _reply, done) => {
    const installation = request.installation;
    if (!installation) return done();
    runAsCaller({ flow: `installation:${installation.id}`, deadlineAt: performance.now() + timeoutMs }, done);
  };
  // Only on the routes that may call Composio, ahead of their own pre-handlers (as a global hook
  // would run): a long poll goes through no hook it has no use for.
  app.addHook('onRoute', (route) => {
    if (route.config?.composioCalls === false) return;
    const own = route.preHandler === undefined ? [] : Array.isArray(route.preHandler) ? route.preHandler : [route.preHandler];
    route.preHandler = [scope, ...own];
  });
}

/** The status logged and counted for a request whose client hung up before its answer was done (nginx's). */
const CLIENT_CLOSED_STATUS = 499;

/** How an answer that never finished ended: the client went away, or the broker cut it off (Composio broke off mid-stream). */
type Unfinished = 'client_closed' | 'cut_off';

/**
 * One log line per request, written when the answer has gone: no headers, no bodies. An answer
 * that never finishes gets its line too, when its connection closes (Fastify's `onResponse`
 * runs only for finished answers, so these would be missing from the logs and from
 * `omb_http_request_duration_seconds`): a client that hung up (a long poll, an MCP stream, a
 * body still on its way) is status 499 with `clientClosed: true`; an answer the broker had to
 * cut off keeps the status it was sent with, with `cutOff: true`.
 */
function logOneLinePerRequest(app: FastifyInstance, metrics: Metrics, logger: Logger): void {
  // Each (method, route, status)'s series, found once: 40,000 polls a second observe a handful of them.
  const series = new Map<string, ReturnType<Metrics['httpRequestDuration']['labels']>>();
  const durationOf = (method: string, route: string, status: number) => {
    const key = `${method} ${route} ${status}`;
    let child = series.get(key);
    if (!child) {
      child = metrics.httpRequestDuration.labels({ method, route, status: String(status) });
      series.set(key, child);
    }
    return child;
  };
  const write = (request: FastifyRequest, reply: FastifyReply, unfinished: Unfinished | null, ip = request.ip) => {
    if (request.logged) return;
    request.logged = true;
    const route = request.routeOptions.url;
    const status = unfinished === 'client_closed' ? CLIENT_CLOSED_STATUS : reply.statusCode;
    durationOf(request.method, route ?? 'unknown', status).observe(reply.elapsedTime / 1000);
    // A quiet request (an empty poll) that went well is counted above and logged only at debug.
    const quietly = unfinished === null && status < 400 && request.quiet;
    if (quietly && !logger.isLevelEnabled('debug')) return;
    const line = {
      method: request.method,
      url: route ?? request.url.split('?')[0],
      status,
      ms: Math.round(reply.elapsedTime * 10) / 10,
      installationId: request.installation?.id,
      ip,
      ...(unfinished === 'client_closed' ? { clientClosed: true } : {}),
      ...(unfinished === 'cut_off' ? { cutOff: true } : {}),
    };
    if (unfinished === 'cut_off' || (status >= 500 && unfinished === null)) request.log.error(line, 'request');
    else if (quietly) request.log.debug(line, 'request');
    else request.log.info(line, 'request');
  };
  // The peer's end of a connection (FIN or reset), watched once per connection rather than per
  // request: a held long poll should cost as little as possible.
  const peerGone = new WeakSet<Socket>();
  app.server.on('connection', (socket: Socket) => {
    socket.on('end', markPeerGone);
    socket.on('error', markPeerGone);
  });
  function markPeerGone(this: Socket): void {
    peerGone.add(this);
  }
  app.addHook('onRequest', (request, reply, done) => {
    // Read now: once the connection is gone the socket no longer knows the peer's address.
    const ip = request.ip;
    reply.raw.on('close', () => {
      if (!reply.raw.writableFinished) write(request, reply, peerGone.has(request.raw.socket) ? 'client_closed' : 'cut_off', ip);
    });
    done();
  });
  app.addHook('onResponse', (request, reply, done) => {
    write(request, reply, null);
    done();
  });
}
