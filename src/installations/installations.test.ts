import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness } from '../../test/composio/harness.js';
import { buildTestApp, register, type TestApp } from '../../test/support/app.js';
import { installations } from '../db/schema.js';
import { setRegistrationMode } from './registration.js';

let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp({ REGISTRATIONS_PER_MINUTE: '1000' });
});
afterAll(() => t.close());

const count = async () => (await t.database.db.select().from(installations)).length;

describe('POST /v1/installations', () => {
  it('registers with a 64-hex token, a UUID id and the first version’s Composio user id', async () => {
    const response = await t.app.inject({ method: 'POST', url: '/v1/installations', payload: {} });
    expect(response.statusCode).toBe(201);
    expect(response.headers['cache-control']).toBe('no-store');
    const body = response.json();
    expect(Object.keys(body).sort()).toEqual(['installationId', 'token']);
    expect(body.token).toMatch(/^[0-9a-f]{64}$/);
    expect(body.installationId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);

    const rows = await t.database.sql`select * from installations where id = ${body.installationId}`;
    expect(rows).toHaveLength(1);
    expect(rows[0]!.token_hash).toBe(createHash('sha256').update(body.token).digest('hex'));
    expect(rows[0]!.composio_user_id).toBe(`omb_${body.installationId.replaceAll('-', '')}`);
    expect(JSON.stringify(rows[0])).not.toContain(body.token);
  });

  it('accepts a request with no body at all, as older clients may send', async () => {
    const response = await t.app.inject({ method: 'POST', url: '/v1/installations' });
    expect(response.statusCode).toBe(201);
  });

  it('gives every installation its own token', async () => {
    const a = await register(t.app);
    const b = await register(t.app);
    expect(a.token).not.toBe(b.token);
    expect(a.installationId).not.toBe(b.installationId);
  });

  it.each([
    ['malformed JSON', '{"grant":', 'application/json', 400, 'invalid_json'],
    ['a JSON array', '[]', 'application/json', 400, 'invalid_request'],
    ['a grant of the wrong type', '{"grant": 42}', 'application/json', 400, 'invalid_request'],
    ['a form body', 'a=1', 'application/x-www-form-urlencoded', 415, 'unsupported_media_type'],
  ])('refuses %s and writes nothing', async (_name, payload, contentType, status, code) => {
    const before = await count();
    const response = await t.app.inject({
      method: 'POST',
      url: '/v1/installations',
      payload,
      headers: { 'content-type': contentType },
    });
    expect(response.statusCode).toBe(status);
    expect(response.json()).toMatchObject({ code });
    expect(typeof response.json().error).toBe('string');
    expect(await count()).toBe(before);
  });

  it('names the field in a validation error', async () => {
    const response = await t.app.inject({ method: 'POST', url: '/v1/installations', payload: { grant: 42 } });
    expect(response.json().error).toMatch(/^body\.grant: /);
  });

  it('refuses an oversized body with 413 and writes nothing', async () => {
    const before = await count();
    const response = await t.app.inject({
      method: 'POST',
      url: '/v1/installations',
      payload: JSON.stringify({ grant: 'x'.repeat(t.config.limits.bodyLimitBytes + 10) }),
      headers: { 'content-type': 'application/json' },
    });
    expect(response.statusCode).toBe(413);
    expect(response.json()).toEqual({ error: 'request body is too large', code: 'payload_too_large' });
    expect(await count()).toBe(before);
  });

  it('answers 503 while registration is closed, and registers again once it reopens', async () => {
    await setRegistrationMode(t.database.db, 'closed');
    const before = await count();
    const closed = await t.app.inject({ method: 'POST', url: '/v1/installations', payload: {} });
    expect(closed.statusCode).toBe(503);
    expect(closed.json()).toEqual({ error: 'registration is temporarily closed', code: 'registration_closed' });
    expect(await count()).toBe(before);
    await setRegistrationMode(t.database.db, 'open');
    expect((await t.app.inject({ method: 'POST', url: '/v1/installations', payload: {} })).statusCode).toBe(201);
  });
});

describe('registration mode from the environment', () => {
  it('starts closed with REGISTRATION_MODE=closed', async () => {
    const closed = await buildTestApp({ REGISTRATION_MODE: 'closed' });
    try {
      const response = await closed.app.inject({ method: 'POST', url: '/v1/installations', payload: {} });
      expect(response.statusCode).toBe(503);
    } finally {
      await closed.close();
    }
  });
});

describe('registration rate limit', () => {
  it('answers 429 past the per-client limit, counted per client address', async () => {
    const limited = await buildTestApp({ REGISTRATIONS_PER_MINUTE: '3' }, { database: t.database });
    try {
      const from = (ip: string) => limited.app.inject({ method: 'POST', url: '/v1/installations', payload: {}, remoteAddress: ip });
      for (let i = 0; i < 3; i += 1) expect((await from('10.0.0.1')).statusCode).toBe(201);
      const before = await count();
      const refused = await from('10.0.0.1');
      expect(refused.statusCode).toBe(429);
      expect(refused.json()).toEqual({ error: 'too many registration attempts', code: 'rate_limited' });
      expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
      expect(await count()).toBe(before);
      expect((await from('10.0.0.2')).statusCode).toBe(201);
    } finally {
      await limited.close();
    }
  });
});

describe('GET /v1/me', () => {
  it('answers the check-in with plan and quota, no-store', async () => {
    const { installationId, auth } = await register(t.app);
    t.clock.set('2026-11-29T22:10:00Z');
    const response = await t.app.inject({ method: 'GET', url: '/v1/me', headers: auth });
    expect(response.statusCode).toBe(200);
    expect(response.headers['cache-control']).toBe('no-store');
    const body = response.json();
    expect(body).toEqual({
      installationId,
      plan: 'standard',
      quota: { eventsPerDay: 500, keptToday: 0, skippedToday: 0, resetsAt: '2026-11-30T00:00:00.000Z' },
      createdAt: expect.any(String),
    });
    // When it registered, to the millisecond.
    const [row] = await t.database.sql<{ at: string }[]>`
      select to_char(created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as at from installations where id = ${installationId}`;
    expect(body.createdAt).toBe(row!.at);
  });

  it.each([
    ['no authorization header', undefined],
    ['a random token', `Bearer ${randomBytes(32).toString('hex')}`],
    ['a garbled token', 'Bearer not-a-token'],
    ['an uppercase token', `Bearer ${'A'.repeat(64)}`],
    ['another scheme', `Basic ${randomBytes(32).toString('hex')}`],
    ['an empty bearer', 'Bearer '],
  ])('answers 401 for %s', async (_name, authorization) => {
    const response = await t.app.inject({
      method: 'GET',
      url: '/v1/me',
      headers: authorization === undefined ? {} : { authorization },
    });
    expect(response.statusCode).toBe(401);
    expect(response.json()).toEqual({ error: 'missing or invalid installation token', code: 'unauthorized' });
  });

  it('answers 403 installation_disabled (not 401) for a disabled installation', async () => {
    const { installationId, auth } = await register(t.app);
    await t.database.sql`update installations set disabled_at = now() where id = ${installationId}`;
    const response = await t.app.inject({ method: 'GET', url: '/v1/me', headers: auth });
    expect(response.statusCode).toBe(403);
    expect(response.json()).toEqual({ error: expect.any(String), code: 'installation_disabled' });
  });

  it('records last_seen_at without writing on every request', async () => {
    const { installationId, auth } = await register(t.app);
    await t.database.sql`update installations set last_seen_at = now() - interval '1 hour' where id = ${installationId}`;
    await t.app.inject({ method: 'GET', url: '/v1/me', headers: auth });
    const [first] = await t.database.sql`select last_seen_at, xmin::text as version from installations where id = ${installationId}`;
    expect(Date.now() - new Date(first!.last_seen_at).getTime()).toBeLessThan(60_000);
    await t.app.inject({ method: 'GET', url: '/v1/me', headers: auth });
    await t.app.inject({ method: 'GET', url: '/v1/me', headers: auth });
    const [second] = await t.database.sql`select xmin::text as version from installations where id = ${installationId}`;
    expect(second!.version).toBe(first!.version);
  });
});

describe('GET /v1/me under a flood', () => {
  it('answers 30 check-ins a minute per token and 429 with retry-after beyond, to that token only', async () => {
    const flooder = await register(t.app);
    const other = await register(t.app);
    const answers = await Promise.all(
      Array.from({ length: 100 }, () => t.app.inject({ method: 'GET', url: '/v1/me', headers: flooder.auth })),
    );
    const statuses = answers.map((a) => a.statusCode);
    expect(statuses.filter((s) => s === 200)).toHaveLength(30);
    expect(statuses.filter((s) => s === 429)).toHaveLength(70);
    const refused = answers.find((a) => a.statusCode === 429)!;
    expect(refused.json()).toEqual({ error: expect.any(String), code: 'rate_limited' });
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    expect(Number(refused.headers['retry-after'])).toBeLessThanOrEqual(60);

    expect((await t.app.inject({ method: 'GET', url: '/v1/me', headers: other.auth })).statusCode).toBe(200);
  });

  it('turns a flooding token away before looking it up: unknown and disabled tokens get 429 too', async () => {
    const disabled = await register(t.app);
    await t.database.sql`update installations set disabled_at = now() where id = ${disabled.installationId}`;
    const unknown = { authorization: `Bearer ${randomBytes(32).toString('hex')}` };
    for (const [auth, first] of [
      [unknown, 401],
      [disabled.auth, 403],
    ] as const) {
      const statuses = (
        await Promise.all(Array.from({ length: 40 }, () => t.app.inject({ method: 'GET', url: '/v1/me', headers: auth })))
      ).map((a) => a.statusCode);
      expect(statuses.filter((s) => s === first)).toHaveLength(30);
      expect(statuses.filter((s) => s === 429)).toHaveLength(10);
    }
  });
});

describe('DELETE /v1/me', () => {
  it('removes the installation; its token then gets 401', async () => {
    const h = await startHarness();
    const withComposio = await buildTestApp({}, { database: t.database, composio: h.gateway });
    try {
      const { installationId, auth } = await register(withComposio.app);
      const response = await withComposio.app.inject({ method: 'DELETE', url: '/v1/me', headers: auth });
      expect(response.statusCode).toBe(204);
      expect(await t.database.sql`select 1 from installations where id = ${installationId}`).toHaveLength(0);
      expect((await withComposio.app.inject({ method: 'GET', url: '/v1/me', headers: auth })).statusCode).toBe(401);
    } finally {
      await withComposio.close();
      await h.close();
    }
  });

  it('keeps the installation when Composio cannot be reached, so removal can be tried again', async () => {
    const { installationId, auth } = await register(t.app);
    const response = await t.app.inject({ method: 'DELETE', url: '/v1/me', headers: auth });
    expect(response.statusCode).toBe(502);
    expect(response.json().code).toBe('upstream_unavailable');
    expect(await t.database.sql`select 1 from installations where id = ${installationId}`).toHaveLength(1);
    expect((await t.app.inject({ method: 'GET', url: '/v1/me', headers: auth })).statusCode).toBe(200);
  });

  it('cannot remove anything without a valid token', async () => {
    const before = await count();
    const response = await t.app.inject({
      method: 'DELETE',
      url: '/v1/me',
      headers: { authorization: `Bearer ${randomBytes(32).toString('hex')}` },
    });
    expect(response.statusCode).toBe(401);
    expect(await count()).toBe(before);
  });
});
