import diagnostics from 'node:diagnostics_channel';
import { readFile } from 'node:fs/promises';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { generateApiDocument } from '../src/api-document.js';
import { buildTestApp, type TestApp } from './support/app.js';

const METHODS = ['get', 'put', 'post', 'delete', 'patch'] as const;

interface Operation {
  security?: Record<string, string[]>[];
  responses: Record<string, { description: string }>;
}
interface Spec {
  openapi: string;
  paths: Record<string, Partial<Record<(typeof METHODS)[number], Operation>>>;
}

let t: TestApp;
const routes = new Set<string>();

// Fastify announces every new instance on this channel, before any route is added to it.
function collectRoutes(message: unknown): void {
  const { fastify } = message as { fastify: FastifyInstance };
  fastify.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) routes.add(`${method} ${route.url}`);
  });
}

beforeAll(async () => {
  diagnostics.subscribe('fastify.initialization', collectRoutes);
  try {
    t = await buildTestApp();
  } finally {
    diagnostics.unsubscribe('fastify.initialization', collectRoutes);
  }
});
afterAll(() => t.close());

const committed = () => readFile(new URL('../openapi.yaml', import.meta.url), 'utf8');

function operations(spec: Spec): [string, Operation][] {
  return Object.entries(spec.paths).flatMap(([path, item]) =>
    METHODS.flatMap((method) => (item[method] ? [[`${method.toUpperCase()} ${path}`, item[method]] as [string, Operation]] : [])),
  );
}

describe('openapi.yaml', () => {
  it('is exactly what the routes declare (run `npm run openapi` after changing a route)', async () => {
    expect(await committed()).toBe(await generateApiDocument());
  });

  it('describes every route the broker serves', async () => {
    const spec = new Set(operations(parse(await committed()) as Spec).map(([route]) => route.replace(/\{(\w+)\}/g, ':$1')));
    // Swagger UI's own files and copies of the document are not part of the API.
    const served = [...routes].filter((r) => !r.startsWith('HEAD ') && !/^GET \/docs\/./.test(r));
    expect(served).toContain('GET /v1/me');
    expect(
      served.filter((r) => !spec.has(r)),
      'served but missing from openapi.yaml',
    ).toEqual([]);
    expect(
      [...spec].filter((r) => !served.includes(r)),
      'in openapi.yaml but not served',
    ).toEqual([]);
  });

  it('declares the answers of every route, and which token each installation and admin route takes', async () => {
    const spec = parse(await committed()) as Spec;
    for (const [route, operation] of operations(spec)) {
      expect(
        Object.values(operation.responses).map((r) => r.description),
        route,
      ).not.toContain('Default Response');
      const schemes = (operation.security ?? []).flatMap(Object.keys);
      if (route.includes(' /v1/admin/')) expect(schemes, route).toEqual(['operatorToken']);
      else if (route === 'POST /v1/installations' || route === 'POST /v1/webhooks/composio' || !route.includes(' /v1/')) {
        expect(schemes, route).toEqual([]);
      } else expect(schemes, route).toEqual(['installationToken']);
    }
  });

  it('is served at /openapi.yaml', async () => {
    const response = await t.app.inject({ method: 'GET', url: '/openapi.yaml' });
    expect(response.statusCode).toBe(200);
    expect(response.headers['content-type']).toMatch(/yaml/);
    expect(parse(response.body).openapi).toBe('3.1.0');
    expect(response.body).toBe(await committed());
  });

  it('names the broker where PUBLIC_URL says, in /openapi.yaml and in the document /docs shows; without it, the origin it is fetched from', async () => {
    const servers = async (app: FastifyInstance) => {
      const yaml = await app.inject({ method: 'GET', url: '/openapi.yaml' });
      const page = await app.inject({ method: 'GET', url: '/docs/json' });
      expect(page.statusCode).toBe(200);
      expect(page.json().servers).toEqual(parse(yaml.body).servers);
      return (parse(yaml.body).servers as { url: string }[]).map((server) => server.url);
    };
    const published = await buildTestApp({ PUBLIC_URL: 'https://broker.example/omb/', PORT: '9999' }, { database: t.database });
    try {
      expect(await servers(published.app)).toEqual(['https://broker.example/omb']);
    } finally {
      await published.close();
    }
    expect(await servers(t.app)).toEqual(['/']);
  });
});
