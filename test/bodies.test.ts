import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ConnectorsWorld, composioRequests, type Member, member, startWorld } from './connectors/support.js';

/**
 * One rule for the API's request bodies: an empty body is no body; any other must be UTF-8 JSON
 * (`415` for every other media type alike, `400 invalid_utf8` for bytes that are not UTF-8) and
 * hold no `__proto__` or `constructor` key (`400 forbidden_key`, naming where).
 */

let w: ConnectorsWorld;
let m: Member;
beforeAll(async () => {
  w = await startWorld();
  m = await member(w.t.app);
});
afterAll(() => w.close());

const installations = async () => (await w.t.database.sql<{ n: number }[]>`select count(*)::int as n from installations`)[0]!.n;

const register = (payload: string | Buffer, headers: Record<string, string>) =>
  w.t.app.inject({ method: 'POST', url: '/v1/installations', headers, payload });

const authorize = (payload: string | Buffer, contentType = 'application/json') =>
  w.t.app.inject({
    method: 'POST',
    url: '/v1/connectors/gmail/authorize',
    headers: { ...m.auth, 'content-type': contentType },
    payload,
  });

describe('keys that name a prototype', () => {
  it.each([
    ['__proto__ at the top', '{"__proto__": {"admin": true}}', 'body.__proto__'],
    ['constructor at the top', '{"constructor": {"prototype": {"admin": true}}}', 'body.constructor'],
    ['a plain constructor key', '{"constructor": 1}', 'body.constructor'],
    ['__proto__ spelled with escapes', '{"\\u005f\\u005fproto\\u005f\\u005f": {}}', 'body.__proto__'],
    ['__proto__ inside an array', '{"grant": [{"x": {"__proto__": 1}}]}', 'body.grant.0.x.__proto__'],
  ])('refuses %s with 400 forbidden_key, naming where, and writes nothing', async (_what, payload, where) => {
    const before = await installations();
    const response = await register(payload, { 'content-type': 'application/json' });
    expect(response.statusCode).toBe(400);
    expect(response.json()).toEqual({ error: `${where}: keys named __proto__ or constructor are not accepted`, code: 'forbidden_key' });
    expect(await installations()).toBe(before);
  });

  it('names the field on a route with nested bodies, before Composio is asked', async () => {
    const before = w.h.sim.controls.requests().length;
    const response = await w.t.app.inject({
      method: 'POST',
      url: '/v1/triggers',
      headers: { ...m.auth, 'content-type': 'application/json' },
      payload:
        '{"automationId":"a","toolkit":"github","triggerSlug":"GITHUB_STAR_ADDED_EVENT","connectedAccountId":"ca_x","config":{"repo":"r","constructor":{"prototype":{}}}}',
    });
    expect(response.json()).toEqual({
      error: 'body.config.constructor: keys named __proto__ or constructor are not accepted',
      code: 'forbidden_key',
    });
    expect(response.statusCode).toBe(400);
    expect(composioRequests(w.h, before)).toEqual([]);
  });

  it('still takes such words as values, and as parts of longer keys', async () => {
    const labelled = await authorize('{"alias": "__proto__ constructor"}');
    expect(labelled.statusCode).toBe(200);
    expect(labelled.json().alias).toBe('__proto__ constructor');
    const response = await register('{"my_constructor": 1, "__proto__x": 2}', { 'content-type': 'application/json' });
    expect(response.statusCode).toBe(201);
  });
});

describe('media types', () => {
  const refusedAsNotJson = { error: 'content-type must be application/json', code: 'unsupported_media_type' };

  it.each([
    ['text/plain', '{}'],
    ['text/plain; charset=utf-8', 'hello'],
    ['application/x-www-form-urlencoded', 'a=1'],
    ['multipart/form-data; boundary=x', '--x\r\ncontent-disposition: form-data; name="a"\r\n\r\n1\r\n--x--\r\n'],
    ['application/xml', '<a/>'],
    ['application/vnd.api+json', '{}'],
  ])('answers a %s body with one 415, writing nothing', async (contentType, payload) => {
    const before = await installations();
    const response = await register(payload, { 'content-type': contentType });
    expect(response.statusCode).toBe(415);
    expect(response.json()).toEqual(refusedAsNotJson);
    expect(await installations()).toBe(before);
  });

  it('answers the same 415 on every route that takes a body, before Composio is asked', async () => {
    const before = w.h.sim.controls.requests().length;
    for (const contentType of ['text/plain', 'application/x-www-form-urlencoded']) {
      const answers = await Promise.all([
        authorize('alias=work', contentType),
        w.t.app.inject({ method: 'POST', url: '/v1/triggers', headers: { ...m.auth, 'content-type': contentType }, payload: 'x' }),
        w.t.app.inject({ method: 'PUT', url: '/v1/me/grant', headers: { ...m.auth, 'content-type': contentType }, payload: 'x' }),
        w.t.app.inject({ method: 'POST', url: '/v1/events/ack', headers: { ...m.auth, 'content-type': contentType }, payload: 'x' }),
      ]);
      for (const response of answers) {
        expect(response.statusCode).toBe(415);
        expect(response.json()).toEqual(refusedAsNotJson);
      }
    }
    expect(composioRequests(w.h, before)).toEqual([]);
  });

  it('answers a body without any content type with the same 415', async () => {
    const response = await register('{}', {});
    expect(response.statusCode).toBe(415);
    expect(response.json()).toEqual(refusedAsNotJson);
  });

  it.each([
    ['application/json', ''],
    ['application/json', ' \n'],
    ['text/plain', ''],
    ['application/x-www-form-urlencoded', ''],
  ])('takes an empty %s body as no body', async (contentType, payload) => {
    const response = await register(payload, { 'content-type': contentType });
    expect(response.statusCode).toBe(201);
  });

  it.each([
    'application/json; charset=utf-8',
    'application/json; charset=UTF-8',
    'APPLICATION/JSON',
    'application/json; charset=iso-8859-1',
  ])('reads %s as JSON in UTF-8, whatever charset it names', async (contentType) => {
    const response = await register('{}', { 'content-type': contentType });
    expect(response.statusCode).toBe(201);
  });
});

describe('bytes that are not UTF-8', () => {
  const notUtf8 = { error: 'body is not valid UTF-8', code: 'invalid_utf8' };
  const withBytes = (before: string, bytes: number[], after: string) =>
    Buffer.concat([Buffer.from(before), Buffer.from(bytes), Buffer.from(after)]);

  it('refuses an account label of bytes that are not UTF-8, never making it "���"', async () => {
    const before = w.h.sim.controls.requests().length;
    const response = await authorize(withBytes('{"alias":"', [0xff, 0xfe, 0xfd], '"}'));
    expect(response.statusCode).toBe(400);
    expect(response.json()).toEqual(notUtf8);
    expect(composioRequests(w.h, before)).toEqual([]);
    expect(w.h.sim.controls.state().accounts.some((a) => a.alias?.includes('\uFFFD'))).toBe(false);
  });

  it.each([
    ['a lone continuation byte', [0x80]],
    ['a truncated sequence', [0xe2, 0x82]],
    ['an overlong encoding of "/"', [0xc0, 0xaf]],
    ['an encoded UTF-16 surrogate', [0xed, 0xa0, 0x80]],
    ['Latin-1 "é"', [0xe9]],
  ])('refuses %s with 400 invalid_utf8 and writes nothing, whatever charset is named', async (_what, bytes) => {
    const before = await installations();
    for (const contentType of ['application/json', 'application/json; charset=iso-8859-1']) {
      const response = await register(withBytes('{"grant":"', bytes, '"}'), { 'content-type': contentType });
      expect(response.statusCode).toBe(400);
      expect(response.json()).toEqual(notUtf8);
    }
    expect(await installations()).toBe(before);
  });

  it('takes text in UTF-8, emoji and all', async () => {
    const response = await authorize(Buffer.from('{"alias":"trabajo ñ 😀"}'));
    expect(response.statusCode).toBe(200);
    expect(response.json().alias).toBe('trabajo ñ 😀');
  });
});
