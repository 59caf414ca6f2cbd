import diagnostics from 'node:diagnostics_channel';
import { readFile } from 'node:fs/promises';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { buildTestApp, type TestApp } from './support/app.js';

const METHODS = ['get', 'put', 'post', 'delete', 'patch'] as const;

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

async function specRoutes(): Promise<Set<string>> {
  const spec = parse(await readFile(new URL('../openapi.yaml', import.meta.url), 'utf8')) as {
    paths: Record<string, Record<string, unknown>>;
  };
  const found = new Set<string>();
  for (const [path, item] of Object.entries(spec.paths)) {
    for (const method of METHODS) {
      if (item[method]) found.add(`${method.toUpperCase()} ${path.replace(/\{(\w+)\}/g, ':$1')}`);
    }
  }
  return found;
}

describe('openapi.yaml', () => {
  it('describes exactly the routes the broker serves', async () => {
    const spec = await specRoutes();
    const served = new Set([...routes].filter((r) => !r.startsWith('HEAD ')));
    expect(served.has('GET /v1/me')).toBe(true);
    expect([...served].filter((r) => !spec.has(r)), 'served but missing from openapi.yaml').toEqual([]);
    expect([...spec].filter((r) => !served.has(r)), 'in openapi.yaml but not served').toEqual([]);
  });

  it('is served at /openapi.yaml', async () => {
    const response = await t.app.inject({ method: 'GET', url: '/openapi.yaml' });
    expect(response.statusCode).toBe(200);
    expect(response.headers['content-type']).toMatch(/yaml/);
    expect(parse(response.body).openapi).toBe('3.1.0');
  });
});
