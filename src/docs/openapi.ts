import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';
import { jsonSchemaTransform, jsonSchemaTransformObject } from 'fastify-type-provider-zod';
import type { OpenAPIV3_1 } from 'openapi-types';
import { z } from 'zod';

/**
 * The API reference is generated from the routes' own schemas: `/openapi.yaml` is what the
 * routes declare, `npm run openapi` writes the same text to the repository's `openapi.yaml`,
 * and `/docs` is Swagger UI, served from its npm package (nothing is fetched from a CDN).
 */

const DESCRIPTION =
  "One shared Composio project serving many OpenMausBot installations: registration and check-in, connected apps, app events, plans and the operators' API.\n\n" +
  'Every error is `{"error": "<one human sentence>", "code": "<snake_case>"}`. Installation routes take `authorization: Bearer <64 lowercase hex>` and answer with `cache-control: no-store`.';

const TAGS: OpenAPIV3_1.TagObject[] = [
  { name: 'service' },
  { name: 'installations' },
  {
    name: 'connected apps',
    description:
      'The routes the existing client speaks, with the same bodies. Each installation has its own Composio user and Tool Router Session; all of them share one project key held here.',
  },
  { name: 'plans', description: 'Paid-plan grants signed by an operator key.' },
  {
    name: 'triggers',
    description:
      "An installation's triggers on its connected accounts: created and switched on Composio, stored here, and answered with their status and today's counts.",
  },
  {
    name: 'events',
    description:
      'App events. Composio posts signed webhooks; the broker queues each event for its installation, which long-polls `/v1/events` and acknowledges with the cursor.',
  },
  {
    name: 'operators',
    description:
      'The admin API. Every route takes `authorization: Bearer <admin token>`: an EdDSA JWS from an operator key (`aud: omb-broker-admin`, at most 15 minutes between `iat` and `exp`), minted with `npm run cli -- admin-token`. Without `OPERATOR_PUBLIC_KEYS` every admin route answers `403 admin_disabled`. Limited to 120 requests a minute per client address.',
  },
];

const SECURITY_SCHEMES: Record<string, OpenAPIV3_1.SecuritySchemeObject> = {
  installationToken: {
    type: 'http',
    scheme: 'bearer',
    description: 'The 64-hex token from `POST /v1/installations`.',
  },
  operatorToken: {
    type: 'http',
    scheme: 'bearer',
    bearerFormat: 'JWT',
    description: 'A short admin token (EdDSA JWS, `aud` `omb-broker-admin`, at most 15 minutes).',
  },
};

/** Swagger UI's own routes are not part of the API; the page itself is, described here. */
const DOCS_PATH: OpenAPIV3_1.PathItemObject = {
  get: {
    tags: ['service'],
    summary: 'This reference as a web page',
    responses: {
      '200': { description: 'Swagger UI showing this document, served from the broker itself.', content: { 'text/html': {} } },
    },
  },
};

const SHARED_REF = /#\/components\/schemas\/__shared#\/\$defs\/(\w+)/g;

/**
 * zod writes a recursive schema (a trigger's `config` holds any JSON) as a definition under
 * `__shared`, referred to by a pointer no reader resolves: it becomes a component of its own.
 */
function hoistRecursiveSchemas(document: OpenAPIV3_1.Document): OpenAPIV3_1.Document {
  const schemas = { ...document.components?.schemas } as Record<string, { $defs?: Record<string, unknown> }>;
  const shared = schemas.__shared?.$defs ?? {};
  delete schemas.__shared;
  const names = Object.keys(shared);
  const nameOf = (key: string) => (names.length === 1 ? 'JsonValue' : `JsonValue${names.indexOf(key) + 1}`);
  for (const key of names) schemas[nameOf(key)] = shared[key] as { $defs?: Record<string, unknown> };
  const text = JSON.stringify({ ...document, components: { ...document.components, schemas } });
  return JSON.parse(text.replace(SHARED_REF, (_match, key: string) => `#/components/schemas/${nameOf(key)}`));
}

/**
 * Keeps the components the document refers to. Every schema with an id is offered twice
 * (as read and as answered); only the ones routes use belong in the reference.
 */
function referencedOnly(document: OpenAPIV3_1.Document): OpenAPIV3_1.Document {
  const schemas = document.components?.schemas ?? {};
  const used = new Set<string>();
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) {
      for (const item of node) visit(item);
      return;
    }
    if (node === null || typeof node !== 'object') return;
    for (const [key, value] of Object.entries(node)) {
      if (key === '$ref' && typeof value === 'string' && value.startsWith('#/components/schemas/')) {
        const name = value.slice('#/components/schemas/'.length);
        if (!used.has(name)) {
          used.add(name);
          visit(schemas[name]);
        }
      } else visit(value);
    }
  };
  visit(document.paths);
  const kept = Object.fromEntries(Object.entries(schemas).filter(([name]) => used.has(name)));
  return { ...document, components: { ...document.components, schemas: kept } };
}

/**
 * Any route can answer `503`: the one error mapping (src/http/errors.ts) gives it for every
 * request while the database is unreachable or the broker is shutting down. So it is declared
 * here, once, on every operation that does not declare a `503` of its own.
 */
function unavailableEverywhere(document: OpenAPIV3_1.Document): OpenAPIV3_1.Document {
  type Operation = { responses?: Record<string, unknown> };
  // A copy: the document holds shared constants (the `/docs` page's entry).
  const paths = structuredClone(document.paths ?? {}) as Record<string, Record<string, Operation | unknown>>;
  for (const item of Object.values(paths)) {
    for (const method of ['get', 'put', 'post', 'delete', 'patch']) {
      const operation = item[method] as Operation | undefined;
      if (!operation || operation.responses?.['503']) continue;
      // A fresh object each time: one shared object would be written as a YAML alias.
      operation.responses = {
        ...operation.responses,
        '503': {
          description:
            'The database is not reachable (`database_unavailable`) or the broker is shutting down (`shutting_down`); retry after `retry-after`.',
          content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
        },
      };
    }
  }
  return { ...document, paths: paths as OpenAPIV3_1.PathsObject };
}

/**
 * Where the reference says the API is, and so where `/docs`' "Try it out" sends requests: the
 * broker's public address (`PUBLIC_URL`) when configured. Otherwise `/`, the origin the document
 * was fetched from, which is right however the broker was reached (a fixed `127.0.0.1:8787` is
 * not, behind a proxy or on another port); the repository's `openapi.yaml` is written so.
 */
function servers(publicUrl: string | undefined): OpenAPIV3_1.ServerObject[] {
  if (publicUrl !== undefined) return [{ url: publicUrl, description: 'This broker (`PUBLIC_URL`).' }];
  return [{ url: '/', description: 'The broker serving this document.' }];
}

/** Collects the routes' schemas into the reference and serves it (`/openapi.yaml`, `/docs`). */
export async function apiDocs(app: FastifyInstance, options: { publicUrl?: string | undefined } = {}): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: { title: 'OpenMausBot managed connection broker', version: '0.1.0', description: DESCRIPTION },
      servers: servers(options.publicUrl),
      tags: TAGS,
      components: { securitySchemes: SECURITY_SCHEMES },
      paths: { '/docs': DOCS_PATH },
    },
    transform: jsonSchemaTransform,
    transformObject: (document) =>
      referencedOnly(unavailableEverywhere(hoistRecursiveSchemas(jsonSchemaTransformObject(document) as OpenAPIV3_1.Document))),
  });

  await app.register(swaggerUi, {
    routePrefix: '/docs',
    theme: { title: 'OpenMausBot broker — API reference' },
    uiConfig: { docExpansion: 'list', deepLinking: true },
  });

  app.get(
    '/openapi.yaml',
    {
      schema: {
        tags: ['service'],
        summary: 'This document',
        response: {
          200: { description: 'The OpenAPI description of the broker.', content: { 'application/yaml': { schema: z.string() } } },
        },
      },
    },
    async (_request, reply) => reply.type('application/yaml; charset=utf-8').send(apiDocument(app)),
  );
}

/** The reference as YAML, exactly as `/openapi.yaml` serves it and `openapi.yaml` holds it. */
export function apiDocument(app: FastifyInstance): string {
  return app.swagger({ yaml: true });
}
