import { createHash } from 'node:crypto';
import { base64url, exportJWK, generateKeyPair, generateSecret } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config.js';
import { signGrant } from '../../src/operators/sign.js';
import { buildTestApp, register, type TestApp } from '../support/app.js';
import { adminClaims, grantClaims, operatorKey, signClaims, signWith, type TestOperatorKey, trusting, unsigned } from './support.js';

let t: TestApp;
let key: TestOperatorKey;
let rotated: TestOperatorKey;
let stranger: TestOperatorKey;

beforeAll(async () => {
  [key, rotated, stranger] = await Promise.all([operatorKey('op-2025'), operatorKey('op-2026'), operatorKey('op-2025')]);
  t = await buildTestApp({ ...trusting(key, rotated), QUOTA_PAID: '1234', REGISTRATIONS_PER_MINUTE: '1000' });
});
afterAll(() => t.close());

const present = (auth: { authorization: string }, grant: string) =>
  t.app.inject({ method: 'PUT', url: '/v1/me/grant', headers: auth, payload: { grant } });
const me = async (auth: { authorization: string }) => (await t.app.inject({ method: 'GET', url: '/v1/me', headers: auth })).json();
const grantRows = async () => (await t.database.sql`select count(*)::int as n from grants`)[0]!.n as number;
const installationRows = async () => (await t.database.sql`select count(*)::int as n from installations`)[0]!.n as number;

describe('PUT /v1/me/grant', () => {
  it('puts the installation on the paid plan with the configured quota', async () => {
    const { installationId, auth } = await register(t.app);
    const claims = grantClaims(t.clock.now(), { sub: 'cloud-paid' });
    const response = await present(auth, await signClaims(key, claims));
    expect(response.statusCode).toBe(200);
    expect(response.headers['cache-control']).toBe('no-store');
    expect(response.json()).toEqual({ plan: 'paid', expiresAt: new Date((claims.exp as number) * 1000).toISOString() });

    const body = await me(auth);
    expect(body.plan).toBe('paid');
    expect(body.quota.eventsPerDay).toBe(1234);
    const [row] = await t.database.sql`select subject, plan, holder_installation_id from grants where jti = ${claims.jti!}`;
    expect(row).toEqual({ subject: 'cloud-paid', plan: 'paid', holder_installation_id: installationId });
  });

  it('accepts a grant signed with any configured key, so keys can rotate', async () => {
    const { auth } = await register(t.app);
    expect((await present(auth, await signClaims(rotated, grantClaims(t.clock.now())))).statusCode).toBe(200);
    expect((await me(auth)).plan).toBe('paid');
  });

  describe('refuses algorithm confusion with 400 and writes nothing', () => {
    const attacks: Array<[string, () => Promise<string>]> = [
      ['alg none', async () => unsigned(grantClaims(t.clock.now()), key.kid)],
      [
        'HS256 keyed with the public key’s bytes',
        async () => signWith('HS256', base64url.decode(key.publicJwk.x!), grantClaims(t.clock.now()), key.kid),
      ],
      [
        'HS256 keyed with the public JWK as text',
        async () => signWith('HS256', new TextEncoder().encode(JSON.stringify(key.publicJwk)), grantClaims(t.clock.now()), key.kid),
      ],
      ['HS256 with any secret', async () => signWith('HS256', await generateSecret('HS256'), grantClaims(t.clock.now()), key.kid)],
      [
        'RS256 under a configured kid',
        async () => signWith('RS256', (await generateKeyPair('RS256')).privateKey, grantClaims(t.clock.now()), key.kid),
      ],
      [
        'ES256 under a configured kid',
        async () => signWith('ES256', (await generateKeyPair('ES256')).privateKey, grantClaims(t.clock.now()), key.kid),
      ],
      ['another key signing under a configured kid', async () => signClaims(stranger, grantClaims(t.clock.now()), { kid: key.kid })],
      ['a kid not in the JWKS', async () => signClaims(stranger, grantClaims(t.clock.now()), { kid: 'op-unknown' })],
      ['no kid at all', async () => signClaims(key, grantClaims(t.clock.now()), { kid: null })],
      [
        'a valid signature with the claims swapped',
        async () => {
          const [header, , signature] = (await signClaims(key, grantClaims(t.clock.now()))).split('.');
          const forged = base64url.encode(JSON.stringify(grantClaims(t.clock.now(), { exp: 4_102_444_800 })));
          return `${header}.${forged}.${signature}`;
        },
      ],
    ];
    it.each(attacks)('%s', async (_name, forge) => {
      const { auth } = await register(t.app);
      const before = await grantRows();
      const response = await present(auth, await forge());
      expect(response.statusCode).toBe(400);
      expect(response.json().code).toBe('grant_unverifiable');
      expect(response.json().error).toMatch(/^the grant/);
      expect(await grantRows()).toBe(before);
      expect((await me(auth)).plan).toBe('standard');
    });
  });

  it.each([
    ['text that is no token', 'not-a-grant', 'grant_malformed'],
    ['three parts of garbage', 'a.b.c', 'grant_malformed'],
    ['a JSON web encryption (five parts)', 'a.b.c.d.e', 'grant_malformed'],
  ])('refuses %s with 400', async (_name, grant, code) => {
    const { auth } = await register(t.app);
    const response = await present(auth, grant);
    expect(response.statusCode).toBe(400);
    expect(response.json()).toMatchObject({ code });
  });

  it.each([
    ['jti', /"jti"/],
    ['sub', /"sub"/],
    ['exp', /"exp"/],
    ['iat', /"iat"/],
    ['plan', /"plan"/],
  ])('refuses a grant without %s with 400 naming the claim', async (claim, message) => {
    const { auth } = await register(t.app);
    const response = await present(auth, await signClaims(key, grantClaims(t.clock.now(), { [claim]: undefined })));
    expect(response.statusCode).toBe(400);
    expect(response.json().code).toBe('grant_malformed');
    expect(response.json().error).toMatch(message);
  });

  it('refuses an empty sub or jti with 400', async () => {
    const { auth } = await register(t.app);
    for (const claim of ['sub', 'jti']) {
      const response = await present(auth, await signClaims(key, grantClaims(t.clock.now(), { [claim]: ' ' })));
      expect(response.statusCode).toBe(400);
      expect(response.json().code).toBe('grant_malformed');
    }
  });

  it.each<[string, (now: number) => Record<string, unknown>, string, RegExp]>([
    ['expired', (now) => ({ iat: now - 3600, exp: now - 60 }), 'grant_expired', /expired on/],
    ['for another audience', () => ({ aud: 'omb-something-else' }), 'grant_foreign', /audience/],
    ['from another issuer', () => ({ iss: 'someone-else' }), 'grant_foreign', /issuer/],
    ['without an issuer', () => ({ iss: undefined }), 'grant_foreign', /issuer/],
    ['for another plan', () => ({ plan: 'gold' }), 'grant_unsupported_plan', /plan/],
    ['issued in the future', (now) => ({ iat: now + 7 * 86_400, exp: now + 30 * 86_400 }), 'grant_not_yet_valid', /not valid yet/],
    ['not valid before next week', (now) => ({ nbf: now + 7 * 86_400 }), 'grant_not_yet_valid', /not valid yet/],
  ])('refuses a genuine grant %s with 403', async (_name, change, code, message) => {
    const now = t.clock.now();
    const { auth } = await register(t.app);
    const before = await grantRows();
    const response = await present(auth, await signClaims(key, grantClaims(now, change(Math.floor(now.getTime() / 1000)))));
    expect(response.statusCode).toBe(403);
    expect(response.json().code).toBe(code);
    expect(response.json().error).toMatch(message);
    expect(await grantRows()).toBe(before);
  });

  it('refuses an admin token presented as a grant', async () => {
    const { auth } = await register(t.app);
    const response = await present(auth, await signClaims(key, adminClaims(t.clock.now())));
    expect(response.statusCode).toBe(403);
    expect(response.json().code).toBe('grant_foreign');
  });

  it('refuses a revoked grant with 403', async () => {
    const claims = grantClaims(t.clock.now());
    await t.database.sql`insert into revoked_grants (jti) values (${claims.jti!})`;
    const { auth } = await register(t.app);
    const response = await present(auth, await signClaims(key, claims));
    expect(response.statusCode).toBe(403);
    expect(response.json()).toEqual({ error: 'the grant has been revoked by the operators', code: 'grant_revoked' });
    expect((await me(auth)).plan).toBe('standard');
  });

  it('binds the grant to the installation that presented it last; the previous holder drops to standard', async () => {
    const grant = await signClaims(key, grantClaims(t.clock.now(), { sub: 'cloud-moving' }));
    const first = await register(t.app);
    const second = await register(t.app);
    expect((await present(first.auth, grant)).statusCode).toBe(200);
    expect((await me(first.auth)).plan).toBe('paid');

    expect((await present(second.auth, grant)).statusCode).toBe(200);
    expect((await me(second.auth)).plan).toBe('paid');
    expect(await me(first.auth)).toMatchObject({ plan: 'standard', quota: { eventsPerDay: 500 } });

    expect((await present(first.auth, grant)).statusCode).toBe(200);
    expect((await me(first.auth)).plan).toBe('paid');
    expect((await me(second.auth)).plan).toBe('standard');
  });

  it('drops the plan the moment the grant expires, by the broker’s clock', async () => {
    const clock = t.clock;
    clock.set('2026-03-01T12:00:00Z');
    try {
      const claims = grantClaims(clock.now(), { exp: Math.floor(Date.parse('2026-03-02T12:00:00Z') / 1000) });
      const grant = await signClaims(key, claims);
      const { auth } = await register(t.app);
      expect((await present(auth, grant)).statusCode).toBe(200);

      clock.set('2026-03-02T11:59:59Z');
      expect(await me(auth)).toMatchObject({ plan: 'paid', quota: { eventsPerDay: 1234 } });
      clock.set('2026-03-02T12:00:00Z');
      expect(await me(auth)).toMatchObject({ plan: 'standard', quota: { eventsPerDay: 500 } });

      const again = await present(auth, grant);
      expect(again.statusCode).toBe(403);
      expect(again.json()).toMatchObject({ code: 'grant_expired', error: expect.stringContaining('2026-03-02T12:00:00.000Z') });
    } finally {
      clock.set(new Date());
    }
  });

  it('keeps the installation’s longest-lived grant when it holds two', async () => {
    const now = t.clock.now();
    const { auth } = await register(t.app);
    const long = grantClaims(now, { exp: Math.floor(now.getTime() / 1000) + 90 * 86_400 });
    await present(auth, await signClaims(key, long));
    const response = await present(auth, await signClaims(key, grantClaims(now)));
    expect(response.json().expiresAt).toBe(new Date((long.exp as number) * 1000).toISOString());
  });

  it('answers 401 without an installation token and 400 without a grant', async () => {
    const grant = await signClaims(key, grantClaims(t.clock.now()));
    expect((await t.app.inject({ method: 'PUT', url: '/v1/me/grant', payload: { grant } })).statusCode).toBe(401);
    const { auth } = await register(t.app);
    const missing = await t.app.inject({ method: 'PUT', url: '/v1/me/grant', headers: auth, payload: {} });
    expect(missing.statusCode).toBe(400);
    expect(missing.json()).toEqual({ error: 'body.grant: is required', code: 'invalid_request' });
  });

  it('never writes a grant to the log', async () => {
    const grant = await signClaims(key, grantClaims(t.clock.now()));
    const { auth } = await register(t.app);
    await present(auth, grant);
    await t.app.inject({ method: 'POST', url: '/v1/installations', payload: { grant } });
    await present(auth, `${grant}x`);
    expect(t.logs.text).toContain('grant presented');
    expect(t.logs.text).not.toContain(grant.split('.')[2]!);
    expect(t.logs.text).not.toContain(grant.split('.')[1]!);
  });
});

describe('POST /v1/installations with a grant', () => {
  it('registers the installation on the paid plan', async () => {
    const claims = grantClaims(t.clock.now());
    const response = await t.app.inject({ method: 'POST', url: '/v1/installations', payload: { grant: await signClaims(key, claims) } });
    expect(response.statusCode).toBe(201);
    const { installationId, token } = response.json();
    expect(await me({ authorization: `Bearer ${token}` })).toMatchObject({ installationId, plan: 'paid', quota: { eventsPerDay: 1234 } });
    const [row] = await t.database.sql`select holder_installation_id from grants where jti = ${claims.jti!}`;
    expect(row!.holder_installation_id).toBe(installationId);
  });

  it.each<[string, () => Promise<string>, number, string]>([
    ['a forged grant', async () => unsigned(grantClaims(t.clock.now()), key.kid), 400, 'grant_unverifiable'],
    ['garbage', async () => 'garbage', 400, 'grant_malformed'],
    [
      'an expired grant',
      async () => signClaims(key, grantClaims(t.clock.now(), { iat: 1_700_000_000, exp: 1_700_000_100 })),
      403,
      'grant_expired',
    ],
    ['a foreign grant', async () => signClaims(key, grantClaims(t.clock.now(), { iss: 'elsewhere' })), 403, 'grant_foreign'],
    [
      'a revoked grant',
      async () => {
        const claims = grantClaims(t.clock.now());
        await t.database.sql`insert into revoked_grants (jti) values (${claims.jti!})`;
        return signClaims(key, claims);
      },
      403,
      'grant_revoked',
    ],
  ])('refuses %s and writes nothing', async (_name, make, status, code) => {
    const grant = await make();
    const [installationsBefore, grantsBefore] = [await installationRows(), await grantRows()];
    const response = await t.app.inject({ method: 'POST', url: '/v1/installations', payload: { grant } });
    expect(response.statusCode).toBe(status);
    expect(response.json().code).toBe(code);
    expect(await installationRows()).toBe(installationsBefore);
    expect(await grantRows()).toBe(grantsBefore);
  });
});

describe('a grant’s claims', () => {
  // Each is genuinely signed by a configured key: only the claims' shape is wrong.
  const refused: Array<[string, Record<string, unknown>, RegExp]> = [
    ['NUL in sub', { sub: 'cloud\u0000x' }, /"sub" claim is invalid/],
    ['NUL in jti', { jti: 'grant\u0000x' }, /"jti" claim is invalid/],
    ['a control character in sub', { sub: 'cloud\u001bx' }, /"sub" claim is invalid/],
    ['DEL in jti', { jti: 'grant\u007f' }, /"jti" claim is invalid/],
    ['a lone surrogate in jti', { jti: 'grant-\ud83d' }, /"jti" claim is invalid/],
    ['a 3,000-character jti', { jti: 'j'.repeat(3000) }, /"jti" claim is invalid/],
    ['a 257-character sub', { sub: 's'.repeat(257) }, /"sub" claim is invalid/],
    ['aud as an array naming the grant audience', { aud: ['omb-connected-apps', 'omb-broker-admin'] }, /"aud" claim is invalid/],
    ['no jti', { jti: undefined }, /lacks its "jti" claim/],
  ];

  it.each(refused)('PUT /v1/me/grant refuses %s with 400 and stores nothing', async (_name, change, message) => {
    const { auth } = await register(t.app);
    const before = await grantRows();
    const response = await present(auth, await signClaims(key, grantClaims(t.clock.now(), change)));
    expect(response.statusCode).toBe(400);
    expect(response.json()).toEqual({ error: expect.stringMatching(message), code: 'grant_malformed' });
    expect(await grantRows()).toBe(before);
    expect((await me(auth)).plan).toBe('standard');
  });

  it.each(refused)('registration refuses %s with 400 and stores nothing', async (_name, change, message) => {
    const grant = await signClaims(key, grantClaims(t.clock.now(), change));
    const [installationsBefore, grantsBefore] = [await installationRows(), await grantRows()];
    const response = await t.app.inject({ method: 'POST', url: '/v1/installations', payload: { grant } });
    expect(response.statusCode).toBe(400);
    expect(response.json()).toEqual({ error: expect.stringMatching(message), code: 'grant_malformed' });
    expect(await installationRows()).toBe(installationsBefore);
    expect(await grantRows()).toBe(grantsBefore);
  });

  it('accepts any well-formed text up to the bound, and stores it exactly as signed', async () => {
    const { installationId, auth } = await register(t.app);
    const claims = grantClaims(t.clock.now(), { sub: `wolke ☁️ 🐭 ${'s'.repeat(244)}`, jti: `🐭${'j'.repeat(254)}` });
    expect([(claims.sub as string).length, (claims.jti as string).length]).toEqual([256, 256]);
    expect((await present(auth, await signClaims(key, claims))).statusCode).toBe(200);
    const rows = await t.database.sql`select jti, subject from grants where holder_installation_id = ${installationId}`;
    expect(rows).toEqual([{ jti: claims.jti, subject: claims.sub }]);
  });

  it('accepts what the operators’ CLI signs', async () => {
    const signed = await signGrant(key.signer, { subject: 'cloud-cli', issuer: 'openmausbot', days: 30, now: t.clock.now() });
    const { auth } = await register(t.app);
    expect((await present(auth, signed.token)).statusCode).toBe(200);
    expect((await me(auth)).plan).toBe('paid');
  });
});

describe('without OPERATOR_PUBLIC_KEYS', () => {
  it('refuses every grant, at registration too, and writes nothing', async () => {
    const keyless = await buildTestApp({}, { database: t.database });
    try {
      const grant = await signClaims(key, grantClaims(keyless.clock.now()));
      const before = await installationRows();
      const registration = await keyless.app.inject({ method: 'POST', url: '/v1/installations', payload: { grant } });
      expect(registration.statusCode).toBe(403);
      expect(registration.json()).toEqual({
        error: 'this service accepts no paid-plan grants (it has no operator keys configured)',
        code: 'grants_not_accepted',
      });
      expect(await installationRows()).toBe(before);

      const { auth } = await register(keyless.app);
      const presented = await keyless.app.inject({ method: 'PUT', url: '/v1/me/grant', headers: auth, payload: { grant } });
      expect(presented.statusCode).toBe(403);
      expect(presented.json().code).toBe('grants_not_accepted');
    } finally {
      await keyless.close();
    }
  });
});

describe('OPERATOR_PUBLIC_KEYS that could widen what is accepted', () => {
  it.each([
    ['an RSA key', async () => ({ ...(await exportJWK((await generateKeyPair('RS256', { extractable: true })).publicKey)), kid: 'rsa' })],
    ['an HMAC key', async () => ({ kty: 'oct', k: base64url.encode(createHash('sha256').update('x').digest()), kid: 'hmac' })],
    ['a key without kid', async () => ({ ...key.publicJwk, kid: undefined })],
    ['a key for another algorithm', async () => ({ ...key.publicJwk, alg: 'ES256' })],
  ])('stops the start on %s', async (_name, make) => {
    const jwk = await make();
    await expect(buildTestApp({ OPERATOR_PUBLIC_KEYS: JSON.stringify({ keys: [jwk] }) }, { database: t.database })).rejects.toThrow(
      ConfigError,
    );
  });

  it('stops the start on a kid used twice', async () => {
    await expect(
      buildTestApp({ OPERATOR_PUBLIC_KEYS: JSON.stringify({ keys: [key.publicJwk, stranger.publicJwk] }) }, { database: t.database }),
    ).rejects.toThrow(/kid "op-2025" is used twice/);
  });
});
