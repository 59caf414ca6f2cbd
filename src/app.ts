import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import rateLimit from '@fastify/rate-limit';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Clock } from './clock.js';
import type { Config } from './config.js';
import type { Database } from './db/database.js';
import { renderApiReference } from './docs/render.js';
import { installErrorHandling } from './http/errors.js';
import { deleteInstallationRecord, type Installation } from './installations/installations.js';
import { installationRoutes } from './installations/routes.js';

export interface AppDeps {
  config: Config;
  database: Database;
  logger: Logger;
  clock: Clock;
}

const OPENAPI_PATH = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../openapi.yaml');

/** The broker's HTTP surface. No I/O happens here until the app is used. */
export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const { config, database, logger } = deps;
  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: config.limits.bodyLimitBytes,
    trustProxy: config.trustProxy,
    requestIdHeader: false,
    return503OnClosing: true,
    connectionTimeout: 0,
    keepAliveTimeout: 72_000,
    requestTimeout: 0,
    routerOptions: { ignoreTrailingSlash: true },
  });

  app.decorateRequest('installation', null as unknown as Installation);
  installErrorHandling(app);
  logOneLinePerRequest(app);
  await app.register(rateLimit, { global: false });

  app.get('/health', async (_request, reply) => {
    try {
      await database.sql`select 1`;
      return { status: 'ok', database: 'ok' };
    } catch {
      return reply.code(503).send({ error: 'the database is not reachable', code: 'database_unavailable' });
    }
  });

  const openapi = await readFile(OPENAPI_PATH, 'utf8');
  const reference = renderApiReference(openapi);
  app.get('/openapi.yaml', async (_request, reply) => reply.type('application/yaml; charset=utf-8').send(openapi));
  app.get('/docs', async (_request, reply) => reply.type('text/html; charset=utf-8').send(reference));

  await app.register(installationRoutes, {
    database,
    clock: deps.clock,
    quotas: config.quotas,
    registrationMode: config.registrationMode,
    registrationsPerMinute: config.limits.registrationsPerMinute,
    removeInstallation: (installationId) => deleteInstallationRecord(database.db, installationId),
  });

  return app;
}

/** One log line per request, written when the answer has gone: no headers, no bodies. */
function logOneLinePerRequest(app: FastifyInstance): void {
  app.addHook('onResponse', async (request, reply) => {
    const line = {
      method: request.method,
      url: request.routeOptions.url ?? request.url.split('?')[0],
      status: reply.statusCode,
      ms: Math.round(reply.elapsedTime * 10) / 10,
      installationId: request.installation?.id,
      ip: request.ip,
    };
    if (reply.statusCode >= 500) request.log.error(line, 'request');
    else request.log.info(line, 'request');
  });
}
