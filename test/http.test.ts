import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, register, type TestApp } from './support/app.js';

let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp();
});
afterAll(() => t.close());

describe('wire conventions', () => {
  it.each(['/nope', '/v1', '/v1/installations/extra', '/v2/me'])('answers unknown route %s with 404 {error, code}', async (url) => {
    const response = await t.app.inject({ method: 'GET', url });
    expect(response.statusCode).toBe(404);
    expect(response.json()).toEqual({ error: 'not found', code: 'not_found' });
  });

  it('answers a known path with an unknown method as 404 {error, code}', async () => {
    const response = await t.app.inject({ method: 'PATCH', url: '/v1/me' });
    expect(response.statusCode).toBe(404);
    expect(response.json()).toEqual({ error: 'not found', code: 'not_found' });
  });

  it('takes an empty JSON body as no body, as clients send it on body-less requests', async () => {
    const response = await t.app.inject({
      method: 'POST',
      url: '/v1/installations',
      headers: { 'content-type': 'application/json' },
      payload: '',
    });
    expect(response.statusCode).toBe(201);
  });

  it('still refuses a prototype-poisoning body', async () => {
    const response = await t.app.inject({
      method: 'POST',
      url: '/v1/installations',
      headers: { 'content-type': 'application/json' },
      payload: '{"__proto__": {"admin": true}}',
    });
    expect(response.statusCode).toBe(400);
  });

  it('serves /health with the database reachable', async () => {
    const response = await t.app.inject({ method: 'GET', url: '/health' });
    expect(response.statusCode).toBe(200);
    expect(response.json()).toEqual({ status: 'ok', database: 'ok' });
  });

  it('checks authentication before it reads a body', async () => {
    const response = await t.app.inject({
      method: 'DELETE',
      url: '/v1/me',
      headers: { authorization: `Bearer ${randomBytes(32).toString('hex')}` },
    });
    expect(response.statusCode).toBe(401);
  });
});

describe('logs', () => {
  it('write one line per request and never a token, an authorization header or a grant', async () => {
    const { token, auth } = await register(t.app);
    const grant = 'eyJhbGciOiJFZERTQSJ9.eyJwbGFuIjoicGFpZCJ9.c2lnbmF0dXJl';
    const before = t.logs.lines.length;
    await t.app.inject({ method: 'GET', url: '/v1/me', headers: auth });
    await t.app.inject({ method: 'GET', url: '/v1/me', headers: { authorization: `Bearer ${'f'.repeat(64)}` } });
    await t.app.inject({ method: 'POST', url: '/v1/installations', payload: { grant: 42, token } });
    await t.app.inject({
      method: 'POST',
      url: '/v1/installations',
      payload: `{"grant":"${grant}"`,
      headers: { 'content-type': 'application/json' },
    });
    const lines = t.logs.lines.slice(before).map((l) => JSON.parse(l));
    expect(lines.filter((l) => l.msg === 'request')).toHaveLength(4);
    expect(lines.find((l) => l.url === '/v1/me' && l.status === 200)).toMatchObject({ method: 'GET', installationId: expect.any(String) });
    const text = t.logs.text;
    expect(text).not.toContain(token);
    expect(text).not.toContain('f'.repeat(64));
    expect(text).not.toContain(grant);
    expect(text.toLowerCase()).not.toContain('bearer');
  });

  it('redact credentials a component logs by mistake', async () => {
    const { createLogger } = await import('../src/logger.js');
    const { LogCapture } = await import('./support/app.js');
    const capture = new LogCapture();
    const logger = createLogger('info', capture);
    const secret = randomBytes(16).toString('hex');
    logger.info(
      {
        token: secret,
        headers: { authorization: `Bearer ${secret}`, 'x-api-key': secret },
        grant: secret,
        nested: { secret, apiKey: secret },
      },
      'oops',
    );
    logger.info({ req: { headers: { authorization: secret } } }, 'oops');
    await new Promise((resolve) => setImmediate(resolve));
    expect(capture.text).toContain('oops');
    expect(capture.text).not.toContain(secret);
  });
});
