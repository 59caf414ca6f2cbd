import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { ComposioGateway } from '../composio/index.js';
import type { Database } from '../db/database.js';
import { AppError } from '../errors.js';
import { perInstallationLimit } from '../http/installation-limit.js';
import type { InstallationDirectory } from '../installations/directory.js';
import { installationRoute } from '../installations/guard.js';
import { authorize, type NoteSignInLink } from './authorize.js';
import { CatalogCache } from './catalog.js';
import { disconnectAccount, disconnectSelected } from './disconnect.js';
import { inventory } from './inventory.js';
import { countsAsMcpRequest, proxyMcp } from './mcp-proxy.js';
import * as schemas from './route-schemas.js';

export interface ConnectorRoutesDeps {
  database: Database;
  /** Who each token is (the token check of every route here). */
  installations: Pick<InstallationDirectory, 'known' | 'authenticate'>;
  composio: ComposioGateway;
  clock: Clock;
  /** Composio-touching requests per installation per minute. */
  requestsPerMinute: number;
  /** MCP requests per installation per minute (`MCP_REQUESTS_PER_MINUTE`); notifications and pings are free. */
  mcpRequestsPerMinute: number;
  /** `MCP_TIMEOUT_MS`: the MCP server's time for status and headers, and for each silence after. */
  mcpTimeoutMs: number;
  mcpBodyLimitBytes: number;
  logger: Logger;
  /** What `authorize` tells of every sign-in link made (see there). */
  noteSignInLink: NoteSignInLink;
}

/** The connected-app routes the existing client already speaks, with their bodies unchanged. */
export async function connectorRoutes(server: FastifyInstance, deps: ConnectorRoutesDeps): Promise<void> {
  const app = server.withTypeProvider<ZodTypeProvider>();
  const { db } = deps.database;
  const { composio } = deps;
  const catalog = new CatalogCache(composio, deps.clock, deps.logger);
  // Every route here spends the shared Composio budget, so each installation gets a share.
  const routeOptions = installationRoute(deps.installations, {
    limit: perInstallationLimit(server, deps.requestsPerMinute, 'too many connected-app requests; wait a minute and try again'),
  });

  app.get('/v1/connectors/connected', { ...routeOptions, schema: schemas.connected }, async (request) => ({
    configured: true as const,
    services: await inventory(db, composio, catalog, request.installation),
  }));

  app.get('/v1/connectors', { ...routeOptions, schema: schemas.some }, async (request) => ({
    services: await inventory(db, composio, catalog, request.installation, request.query.services),
  }));

  app.post('/v1/connectors/:slug/authorize', { ...routeOptions, schema: schemas.signIn }, async (request) =>
    authorize(
      { db, composio, noteSignInLink: deps.noteSignInLink, clock: deps.clock, log: request.log },
      request.installation,
      request.params.slug,
      request.body.alias,
    ),
  );

  app.delete('/v1/connectors/:slug', { ...routeOptions, schema: schemas.disconnectOne }, async (request) =>
    disconnectSelected(db, composio, request.installation, request.params.slug),
  );

  app.delete('/v1/connectors/:slug/accounts/:accountId', { ...routeOptions, schema: schemas.disconnectById }, async (request) =>
    disconnectAccount(composio, request.installation, request.params.slug, request.params.accountId),
  );

  app.get('/v1/catalog', { ...routeOptions, schema: schemas.catalogPage }, async (_request, reply) => {
    const { body, ageSeconds } = await catalog.get();
    return reply.header('age', String(ageSeconds)).send(body);
  });

  // MCP has its own budget (hosts send many small messages), and what asks the server for no
  // work (notifications, pings) is not counted.
  const mcpOptions = installationRoute(deps.installations, {
    limit: perInstallationLimit(
      server,
      deps.mcpRequestsPerMinute,
      'too many MCP requests; wait a minute and try again',
      (request) => !countsAsMcpRequest(Buffer.isBuffer(request.body) ? request.body : undefined),
    ),
  });

  await server.register(async (mcp) => {
    // The MCP body goes upstream byte for byte, whatever its content type.
    mcp.removeAllContentTypeParsers();
    mcp.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: deps.mcpBodyLimitBytes }, (_request, body, done) => done(null, body));
    const forward = async (request: FastifyRequest, reply: FastifyReply) => {
      const aborted = new AbortController();
      reply.raw.once('close', () => {
        if (!reply.raw.writableFinished) aborted.abort();
      });
      const answer = await proxyMcp(db, composio, request.installation, {
        method: request.method as 'POST' | 'DELETE',
        headers: request.headers,
        body: Buffer.isBuffer(request.body) ? request.body : undefined,
        signal: aborted.signal,
        timeoutMs: deps.mcpTimeoutMs,
      });
      void reply.code(answer.status).headers(answer.headers);
      return reply.send(answer.body ?? '');
    };
    mcp.post('/v1/mcp', { ...mcpOptions, bodyLimit: deps.mcpBodyLimitBytes, schema: schemas.mcpPost }, forward);
    mcp.delete('/v1/mcp', { ...mcpOptions, schema: schemas.mcpDelete }, forward);
    mcp.get('/v1/mcp', { ...mcpOptions, schema: schemas.mcpGet }, async () => {
      throw new AppError(405, 'method_not_allowed', 'This MCP endpoint opens no stream on GET; send messages with POST.', {
        allow: 'POST, DELETE',
      });
    });
  });
}
