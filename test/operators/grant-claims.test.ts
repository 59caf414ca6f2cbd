import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, register, type TestApp } from '../support/app.js';
import { grantClaims, operatorKey, signClaims, type TestOperatorKey, trusting } from './support.js';

/** A genuinely signed grant whose dates cannot be dates is refused as malformed (`400`), never `500`. */

let t: TestApp;
let key: TestOperatorKey;
beforeAll(async () => {
  key = await operatorKey('op-claims');
  t = await buildTestApp({ ...trusting(key), REGISTRATIONS_PER_MINUTE: '1000' });
});
afterAll(() => t.close());

describe('grant dates out of any calendar', () => {
  it.each<[string, (now: number) => Record<string, unknown>, RegExp]>([
    ['an enormous exp', (now) => ({ iat: now, exp: 1e20 }), /"exp"/],
    ['an exp past year 9999', (now) => ({ iat: now, exp: 253_402_300_800 }), /"exp"/],
    ['a negative iat', (now) => ({ iat: -1e16, exp: now + 86_400 }), /"iat"/],
    ['a slightly negative iat', (now) => ({ iat: -1, exp: now + 86_400 }), /"iat"/],
  ])('refuses %s with 400 grant_malformed', async (_name, change, message) => {
    const now = t.clock.now();
    const { auth } = await register(t.app);
    const grant = await signClaims(key, grantClaims(now, change(Math.floor(now.getTime() / 1000))));
    const response = await t.app.inject({ method: 'PUT', url: '/v1/me/grant', headers: auth, payload: { grant } });
    expect(response.statusCode).toBe(400);
    expect(response.json()).toEqual({ error: expect.stringMatching(message), code: 'grant_malformed' });
  });
});
