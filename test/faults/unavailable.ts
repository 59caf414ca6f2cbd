import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import { expect } from 'vitest';

/** One request to the app and how long its answer took. */
export async function timedInject(app: FastifyInstance, request: InjectOptions) {
  const started = performance.now();
  const response = await app.inject(request);
  return { response, ms: performance.now() - started };
}

/** The answer while the database cannot serve: `503 database_unavailable` with `retry-after`. */
export function expectUnavailable(response: LightMyRequestResponse): void {
  expect(response.statusCode).toBe(503);
  expect(response.headers['retry-after']).toBeDefined();
  expect(response.json()).toEqual({ error: expect.any(String), code: 'database_unavailable' });
}
