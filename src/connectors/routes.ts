import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { z } from 'zod';
import type { Clock } from '../clock.js';
import type { ComposioGateway } from '../composio/index.js';
import type { Database } from '../db/database.js';
import { requireInstallation } from '../installations/guard.js';
import { perInstallationLimit } from '../http/installation-limit.js';
import { parseInput } from '../http/validate.js';
import { authorize } from './authorize.js';
import { CatalogCache } from './catalog.js';
import { disconnectAccount, disconnectSelected } from './disconnect.js';
import { inventory } from './inventory.js';
import { proxyMcp } from './mcp-proxy.js';
import { Alias, ConnectedAccountId, ToolkitSlug } from './patterns.js';

export interface ConnectorRoutesDeps {
  database: Database;
  composio: ComposioGateway;
  clock: Clock;
  /** Composio-touching requests per installation per minute. */
  requestsPerMinute: number;
  mcpBodyLimitBytes: number;
  logger: Logger;
}

const SlugParams = z.object({ slug: ToolkitSlug });
const AccountParams = z.object({ slug: ToolkitSlug, accountId: ConnectedAccountId });
const ServicesQuery = z.object({
  services: z
    .string()
    .transform((s) => [...new Set(s.split(',').map((x) => x.trim()).filter(Boolean))])
    .pipe(z.array(ToolkitSlug).min(1, 'must name at least one service').max(100, 'must name at most 100 services')),
});
const AuthorizeBody = z.object({ alias: Alias.optional() }).strict();

/** The connected-app routes the existing client already speaks, with their bodies unchanged. */
export async function connectorRoutes(app: FastifyInstance, deps: ConnectorRoutesDeps): Promise<void> {
  const { db, sql } = deps.database;
  const { composio } = deps;
  const catalog = new CatalogCache(composio, deps.clock, deps.logger);
  // Every route here spends the shared Composio budget, so each installation gets a share.
  // On `onRequest`, before the body is read: without a valid token nothing sent is parsed.
  const routeOptions = {
    onRequest: requireInstallation(sql),
    config: perInstallationLimit(deps.requestsPerMinute, 'too many connected-app requests; wait a minute and try again'),
  };

  app.get('/v1/connectors/connected', routeOptions, async (request) => ({
    configured: true,
    services: await inventory(db, composio, request.installation),
  }));

  app.get('/v1/connectors', routeOptions, async (request) => {
    const { services } = parseInput(ServicesQuery, request.query, 'query');
    return { services: await inventory(db, composio, request.installation, services) };
  });

  app.post('/v1/connectors/:slug/authorize', routeOptions, async (request) => {
    const { slug } = parseInput(SlugParams, request.params, 'params');
    const { alias } = parseInput(AuthorizeBody, request.body, 'body');
    const result = await authorize(db, composio, request.installation, slug, alias);
    request.log.info({ toolkit: slug, connectedAccountId: result.connectedAccountId }, 'sign-in link made');
    return result;
  });

  app.delete('/v1/connectors/:slug', routeOptions, async (request) => {
    const { slug } = parseInput(SlugParams, request.params, 'params');
    return disconnectSelected(db, composio, request.installation, slug);
  });

  app.delete('/v1/connectors/:slug/accounts/:accountId', routeOptions, async (request) => {
    const { slug, accountId } = parseInput(AccountParams, request.params, 'params');
    return disconnectAccount(composio, request.installation, slug, accountId);
  });

  app.get('/v1/catalog', routeOptions, async (_request, reply) => {
    const { body, ageSeconds } = await catalog.get();
    return reply.header('age', String(ageSeconds)).send(body);
  });

  await app.register(async (mcp) => {
    // The MCP body goes upstream byte for byte, whatever its content type.
    mcp.removeAllContentTypeParsers();
    mcp.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: deps.mcpBodyLimitBytes }, (_request, body, done) =>
      done(null, body),
    );
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
      });
      void reply.code(answer.status).headers(answer.headers);
      return reply.send(answer.body ?? '');
    };
    mcp.post('/v1/mcp', { ...routeOptions, bodyLimit: deps.mcpBodyLimitBytes }, forward);
    mcp.delete('/v1/mcp', routeOptions, forward);
  });
}
