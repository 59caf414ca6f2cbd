import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { utcDay } from '../../src/clock.js';
import { dailyUsage, events, grants, revokedGrants } from '../../src/db/schema.js';
import { INSTALLATION_DISABLED_CHANNEL } from '../../src/installations/disable.js';
import { signAdminToken } from '../../src/operators/sign.js';
import { buildEventsApp } from '../events/helpers.js';
import { buildTestApp, register, type TestApp } from '../support/app.js';
import { adminClaims, grantClaims, operatorKey, signClaims, type TestOperatorKey, trusting } from './support.js';

let t: TestApp;
let key: TestOperatorKey;
let stranger: TestOperatorKey;

beforeAll(async () => {
  [key, stranger] = await Promise.all([operatorKey('op-1'), operatorKey('op-x')]);
  t = await buildTestApp({ ...trusting(key), REGISTRATIONS_PER_MINUTE: '1000' });
});
afterAll(() => t.close());

const seconds = (at: Date) => Math.floor(at.getTime() / 1000);
const asOperator = async (claims = adminClaims(t.clock.now())) => ({ authorization: `Bearer ${await signClaims(key, claims)}` });
const admin = async (method: 'GET' | 'PUT' | 'POST', url: string, payload?: Record<string, unknown>) =>
  t.app.inject({ method, url, headers: await asOperator(), payload });
const me = (auth: { authorization: string }) => t.app.inject({ method: 'GET', url: '/v1/me', headers: auth });

describe('the admin token', () => {
  const refused: Array<[string, () => Promise<Record<string, string>>, RegExp]> = [
    ['no token', async () => ({}), /missing operator token/],
    ['an installation token', async () => (await register(t.app)).auth, /invalid operator token/],
    ['garbage', async () => ({ authorization: 'Bearer not.a.token' }), /invalid operator token/],
    [
      'a grant (wrong audience)',
      async () => ({ authorization: `Bearer ${await signClaims(key, grantClaims(t.clock.now()))}` }),
      /not an admin token/,
    ],
    [
      'a token living longer than 15 minutes',
      async () => asOperator(adminClaims(t.clock.now(), { exp: seconds(t.clock.now()) + 16 * 60 })),
      /longer than 15 minutes/,
    ],
    [
      'a token dated in the future to stretch its life',
      async () => asOperator(adminClaims(t.clock.now(), { iat: seconds(t.clock.now()) + 3600, exp: seconds(t.clock.now()) + 3600 + 600 })),
      /not valid yet/,
    ],
    [
      'an expired token',
      async () => asOperator(adminClaims(t.clock.now(), { iat: seconds(t.clock.now()) - 900, exp: seconds(t.clock.now()) - 1 })),
      /expired/,
    ],
    ['a token from another issuer', async () => asOperator(adminClaims(t.clock.now(), { iss: 'elsewhere' })), /issuer/],
    ['a token without sub', async () => asOperator(adminClaims(t.clock.now(), { sub: undefined })), /invalid operator token/],
    [
      'a token signed by an unknown key',
      async () => ({ authorization: `Bearer ${await signClaims(stranger, adminClaims(t.clock.now()))}` }),
      /does not know/,
    ],
    [
      'a token signed by another key under the known kid',
      async () => ({ authorization: `Bearer ${await signClaims(stranger, adminClaims(t.clock.now()), { kid: key.kid })}` }),
      /invalid operator token/,
    ],
  ];

  it.each(refused)('refuses %s with 401', async (_name, headers, message) => {
    const response = await t.app.inject({ method: 'GET', url: '/v1/admin/stats', headers: await headers() });
    expect(response.statusCode).toBe(401);
    expect(response.json()).toEqual({ error: expect.stringMatching(message), code: 'operator_unauthorized' });
  });

  it('refuses before looking at the request: no change happens with a bad token', async () => {
    const { installationId, auth } = await register(t.app);
    const response = await t.app.inject({
      method: 'POST',
      url: `/v1/admin/installations/${installationId}/disable`,
      headers: { authorization: `Bearer ${await signClaims(key, grantClaims(t.clock.now()))}` },
    });
    expect(response.statusCode).toBe(401);
    expect((await me(auth)).statusCode).toBe(200);
  });

  it('accepts a 15-minute token and answers no-store', async () => {
    const headers = await asOperator(adminClaims(t.clock.now(), { exp: seconds(t.clock.now()) + 15 * 60 }));
    const response = await t.app.inject({ method: 'GET', url: '/v1/admin/registration', headers });
    expect(response.statusCode).toBe(200);
    expect(response.headers['cache-control']).toBe('no-store');
  });

  it('is refused altogether when no operator keys are configured', async () => {
    const keyless = await buildTestApp({}, { database: t.database });
    try {
      const response = await keyless.app.inject({ method: 'GET', url: '/v1/admin/stats', headers: await asOperator() });
      expect(response.statusCode).toBe(403);
      expect(response.json()).toEqual({
        error: 'the admin API is off: this broker has no operator keys (OPERATOR_PUBLIC_KEYS)',
        code: 'admin_disabled',
      });
    } finally {
      await keyless.close();
    }
  });

  it('limits admin requests per client address', async () => {
    const headers = await asOperator();
    const from = (ip: string) => t.app.inject({ method: 'GET', url: '/v1/admin/registration', headers, remoteAddress: ip });
    for (let i = 0; i < 120; i += 1) expect((await from('10.9.9.9')).statusCode).toBe(200);
    const limited = await from('10.9.9.9');
    expect(limited.statusCode).toBe(429);
    expect(limited.json()).toEqual({ error: 'too many admin requests', code: 'rate_limited' });
    expect((await from('10.9.9.10')).statusCode).toBe(200);
  });
});

describe('the admin token’s claims', () => {
  const auditRows = async () => (await t.database.sql`select count(*)::int as n from operator_audit`)[0]!.n as number;

  // Each is genuinely signed by a configured key: only the claims' shape is wrong.
  it.each<[string, Record<string, unknown>, RegExp]>([
    ['NUL in sub', { sub: 'ana\u0000root' }, /"sub" claim is invalid/],
    ['NUL in jti', { jti: 'jti\u0000x' }, /"jti" claim is invalid/],
    ['a C1 control character in sub', { sub: 'ana\u009b' }, /"sub" claim is invalid/],
    ['a lone surrogate in jti', { jti: 'jti-\ud800' }, /"jti" claim is invalid/],
    ['a lone low surrogate in sub', { sub: '\udc00ana' }, /"sub" claim is invalid/],
    ['a 3,000-character jti', { jti: 'j'.repeat(3000) }, /"jti" claim is invalid/],
    ['a 257-character sub', { sub: 's'.repeat(257) }, /"sub" claim is invalid/],
    ['aud as an array naming the admin audience', { aud: ['omb-broker-admin', 'omb-connected-apps'] }, /"aud" claim is invalid/],
    ['aud as an array of the admin audience alone', { aud: ['omb-broker-admin'] }, /"aud" claim is invalid/],
    ['no jti', { jti: undefined }, /lacks its "jti" claim/],
  ])('refuses %s with 401 and changes nothing', async (_name, change, message) => {
    const { installationId, auth } = await register(t.app);
    const headers = await asOperator(adminClaims(t.clock.now(), change));
    const before = await auditRows();
    const expected = { error: expect.stringMatching(message), code: 'operator_unauthorized' };

    const stats = await t.app.inject({ method: 'GET', url: '/v1/admin/stats', headers });
    expect(stats.statusCode).toBe(401);
    expect(stats.json()).toEqual(expected);
    const disable = await t.app.inject({ method: 'POST', url: `/v1/admin/installations/${installationId}/disable`, headers });
    expect(disable.statusCode).toBe(401);
    expect(disable.json()).toEqual(expected);
    expect((await me(auth)).statusCode).toBe(200);
    expect(await auditRows()).toBe(before);
  });

  it('accepts any well-formed text up to the bound, and audits the jti exactly as signed', async () => {
    const { installationId } = await register(t.app);
    const claims = adminClaims(t.clock.now(), { sub: `zoë 🐭 ${'s'.repeat(249)}`, jti: `🐭${'j'.repeat(254)}` });
    expect([(claims.sub as string).length, (claims.jti as string).length]).toEqual([256, 256]);
    const disabled = await t.app.inject({
      method: 'POST',
      url: `/v1/admin/installations/${installationId}/disable`,
      headers: await asOperator(claims),
    });
    expect(disabled.statusCode).toBe(200);
    const rows = await t.database.sql`select operator, token_id from operator_audit where target = ${installationId}`;
    expect(rows).toEqual([{ operator: claims.sub, token_id: claims.jti }]);
  });

  it('accepts what the operators’ CLI signs', async () => {
    const signed = await signAdminToken(key.signer, { subject: 'ana', issuer: 'openmausbot', minutes: 15, now: t.clock.now() });
    const response = await t.app.inject({ method: 'GET', url: '/v1/admin/stats', headers: { authorization: `Bearer ${signed.token}` } });
    expect(response.statusCode).toBe(200);
  });
});

describe('registration switch', () => {
  it('closes registration for everyone at once and opens it again', async () => {
    expect((await admin('GET', '/v1/admin/registration')).json()).toEqual({ mode: 'open' });

    const closed = await admin('PUT', '/v1/admin/registration', { mode: 'closed' });
    expect(closed.statusCode).toBe(200);
    expect(closed.json()).toEqual({ mode: 'closed' });
    expect((await admin('GET', '/v1/admin/registration')).json()).toEqual({ mode: 'closed' });

    // Another broker process on the same database sees the switch without being told.
    const other = await buildTestApp({ ...trusting(key) }, { database: t.database });
    try {
      const refused = await other.app.inject({ method: 'POST', url: '/v1/installations', payload: {} });
      expect(refused.statusCode).toBe(503);
      expect(refused.json().code).toBe('registration_closed');
    } finally {
      await other.close();
    }
    expect((await t.app.inject({ method: 'POST', url: '/v1/installations', payload: {} })).statusCode).toBe(503);

    expect((await admin('PUT', '/v1/admin/registration', { mode: 'open' })).json()).toEqual({ mode: 'open' });
    expect((await t.app.inject({ method: 'POST', url: '/v1/installations', payload: {} })).statusCode).toBe(201);
  });

  it.each([
    [{ mode: 'maybe' }, /^body\.mode: /],
    [{}, /^body\.mode: invalid option/],
    [{ mode: 'open', extra: 1 }, /unknown field extra/],
  ])('refuses %j with 400 naming the field', async (payload, message) => {
    const response = await admin('PUT', '/v1/admin/registration', payload);
    expect(response.statusCode).toBe(400);
    expect(response.json()).toEqual({ error: expect.stringMatching(message), code: 'invalid_request' });
  });
});

describe('disable and enable', () => {
  it('answers 403 installation_disabled to a disabled installation at once, and 200 again once enabled', async () => {
    const { installationId, auth } = await register(t.app);
    const notifications: string[] = [];
    const listener = await t.database.sql.listen(INSTALLATION_DISABLED_CHANNEL, (payload) => notifications.push(payload));
    try {
      const disabled = await admin('POST', `/v1/admin/installations/${installationId}/disable`);
      expect(disabled.statusCode).toBe(200);
      expect(disabled.json()).toEqual({ installationId, disabledAt: expect.any(String) });
      const refused = await me(auth);
      expect(refused.statusCode).toBe(403);
      expect(refused.json()).toEqual({ error: expect.any(String), code: 'installation_disabled' });
      await expect.poll(() => notifications).toEqual([installationId]);

      const again = await admin('POST', `/v1/admin/installations/${installationId}/disable`);
      expect(again.json().disabledAt).toBe(disabled.json().disabledAt);

      const enabled = await admin('POST', `/v1/admin/installations/${installationId}/enable`);
      expect(enabled.statusCode).toBe(200);
      expect(enabled.json()).toEqual({ installationId, disabledAt: null });
      expect((await me(auth)).statusCode).toBe(200);
    } finally {
      await listener.unlisten();
    }
  });

  it('forgets a token this process knew before answering the disable, whenever the announcement arrives', async () => {
    const s = await buildEventsApp({ ...trusting(key) }, { database: t.database });
    try {
      const { installationId, auth, token } = await register(s.app);
      expect((await s.app.inject({ method: 'GET', url: '/v1/me', headers: auth })).statusCode).toBe(200);
      expect(s.events.installations.known(token)?.id).toBe(installationId);
      const disabled = await s.app.inject({
        method: 'POST',
        url: `/v1/admin/installations/${installationId}/disable`,
        headers: await asOperator(),
      });
      expect(disabled.statusCode).toBe(200);
      // In the tick the answer arrives: not waiting on this process hearing its own announcement.
      expect(s.events.installations.known(token)).toBeUndefined();
      expect((await s.app.inject({ method: 'GET', url: '/v1/me', headers: auth })).statusCode).toBe(403);
    } finally {
      await s.close();
    }
  });

  it.each(['disable', 'enable'])('%s: 404 for an unknown installation, 400 for a malformed id', async (action) => {
    const unknown = await admin('POST', `/v1/admin/installations/${randomUUID()}/${action}`);
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json()).toEqual({ error: 'no installation has this id', code: 'installation_not_found' });
    const malformed = await admin('POST', `/v1/admin/installations/not-a-uuid/${action}`);
    expect(malformed.statusCode).toBe(400);
    expect(malformed.json().error).toMatch(/^params\.id: /);
  });
});

describe('revoking a grant', () => {
  it('drops its holder to standard, is idempotent, and refuses the grant afterwards', async () => {
    const claims = grantClaims(t.clock.now());
    const grant = await signClaims(key, claims);
    const { auth } = await register(t.app);
    await t.app.inject({ method: 'PUT', url: '/v1/me/grant', headers: auth, payload: { grant } });
    expect((await me(auth)).json().plan).toBe('paid');

    const revoked = await admin('POST', `/v1/admin/grants/${claims.jti}/revoke`);
    expect(revoked.statusCode).toBe(200);
    expect(revoked.json()).toEqual({ jti: claims.jti, revokedAt: expect.any(String) });
    expect((await me(auth)).json()).toMatchObject({ plan: 'standard', quota: { eventsPerDay: 500 } });

    const twice = await admin('POST', `/v1/admin/grants/${claims.jti}/revoke`);
    expect(twice.json()).toEqual(revoked.json());

    const presented = await t.app.inject({ method: 'PUT', url: '/v1/me/grant', headers: auth, payload: { grant } });
    expect(presented.statusCode).toBe(403);
    expect(presented.json().code).toBe('grant_revoked');
  });

  it('revokes a grant before it was ever presented', async () => {
    const claims = grantClaims(t.clock.now());
    expect((await admin('POST', `/v1/admin/grants/${claims.jti}/revoke`)).statusCode).toBe(200);
    const registration = await t.app.inject({
      method: 'POST',
      url: '/v1/installations',
      payload: { grant: await signClaims(key, claims) },
    });
    expect(registration.statusCode).toBe(403);
  });

  it('logs who did it, never the token', async () => {
    const headers = await asOperator(adminClaims(t.clock.now(), { sub: 'operator-zoe' }));
    const jti = randomUUID();
    await t.app.inject({ method: 'POST', url: `/v1/admin/grants/${jti}/revoke`, headers });
    const line = t.logs.lines.map((l) => JSON.parse(l)).find((l) => l.msg === 'operator action' && l.grantId === jti);
    expect(line).toMatchObject({ operator: 'operator-zoe', action: 'revoke grant' });
    expect(t.logs.text).not.toContain(headers.authorization.split(' ')[1]!.split('.')[2]!);
  });
});

describe('GET /v1/admin/stats', () => {
  it('counts installations by plan, activity, today’s events and the queue', async () => {
    const s = await buildTestApp({ ...trusting(key), REGISTRATIONS_PER_MINUTE: '1000' });
    try {
      const now = new Date(Math.floor(Date.now() / 1000) * 1000);
      s.clock.set(now);
      const db = s.database.db;
      const [paid, plain, disabled, dormant, lapsed, revoked] = await Promise.all(Array.from({ length: 6 }, () => register(s.app)));
      const hold = (installationId: string, jti: string, expiresAt: Date) =>
        db.insert(grants).values({ jti, subject: 'cloud', plan: 'paid', holderInstallationId: installationId, issuedAt: now, expiresAt });
      const inAMonth = new Date(now.getTime() + 30 * 86_400_000);
      await hold(paid!.installationId, 'g-paid', inAMonth);
      await hold(disabled!.installationId, 'g-disabled', inAMonth);
      await hold(lapsed!.installationId, 'g-lapsed', new Date(now.getTime() - 1000));
      await hold(revoked!.installationId, 'g-revoked', inAMonth);
      await db.insert(revokedGrants).values({ jti: 'g-revoked' });
      await s.database.sql`update installations set disabled_at = now() where id = ${disabled!.installationId}`;
      await s.database.sql`update installations set last_seen_at = now() - interval '2 days' where id = ${dormant!.installationId}`;

      const today = utcDay(now);
      await db.insert(dailyUsage).values([
        { installationId: paid!.installationId, day: today, kept: 3, skipped: 1 },
        { installationId: plain!.installationId, day: today, kept: 2, skipped: 0 },
        { installationId: paid!.installationId, day: utcDay(new Date(now.getTime() - 86_400_000)), kept: 100, skipped: 7 },
      ]);

      const event = (installationId: string, position: number, ageSeconds: number) => ({
        installationId,
        position,
        id: randomUUID(),
        type: 'trigger.event',
        receivedAt: new Date(now.getTime() - ageSeconds * 1000),
        data: {},
      });
      await db
        .insert(events)
        .values([
          event(paid!.installationId, 1, 9000),
          event(paid!.installationId, 2, 600),
          event(paid!.installationId, 3, 60),
          event(plain!.installationId, 1, 50_000),
          event(dormant!.installationId, 1, 7200),
        ]);
      // As ingest would have left them: each queue's last position, then what was acknowledged.
      await s.database.sql`update installations set last_event_position = 3, acked_event_position = 1 where id = ${paid!.installationId}`;
      await s.database.sql`update installations set last_event_position = 1, acked_event_position = 1 where id = ${plain!.installationId}`;
      await s.database.sql`update installations set last_event_position = 1 where id = ${dormant!.installationId}`;

      const response = await s.app.inject({ method: 'GET', url: '/v1/admin/stats', headers: await asOperator(adminClaims(now)) });
      expect(response.statusCode).toBe(200);
      expect(response.json()).toEqual({
        generatedAt: now.toISOString(),
        registration: 'open',
        installations: { total: 6, disabled: 1, byPlan: { standard: 4, paid: 1 }, activeLastDay: 5 },
        events: { day: today, keptToday: 5, skippedToday: 1 },
        queue: {
          depth: 3,
          oldestUnacknowledgedAt: new Date(now.getTime() - 7_200_000).toISOString(),
          oldestUnacknowledgedAgeSeconds: 7200,
        },
      });
    } finally {
      await s.close();
    }
  });

  it('answers zeros and nulls for an empty service', async () => {
    const s = await buildTestApp({ ...trusting(key) });
    try {
      const response = await s.app.inject({ method: 'GET', url: '/v1/admin/stats', headers: await asOperator(adminClaims(s.clock.now())) });
      expect(response.json()).toMatchObject({
        installations: { total: 0, disabled: 0, byPlan: { standard: 0, paid: 0 }, activeLastDay: 0 },
        events: { keptToday: 0, skippedToday: 0 },
        queue: { depth: 0, oldestUnacknowledgedAt: null, oldestUnacknowledgedAgeSeconds: null },
      });
    } finally {
      await s.close();
    }
  });
});
