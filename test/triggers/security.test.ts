import { beforeAll, describe, expect, it } from 'vitest';
import {
  callsSince,
  composioTrigger,
  createTrigger,
  gmailBody,
  installationWithAccount,
  storedTrigger,
  storedTriggerCount,
  type TestInstallation,
  useTriggersWorld,
} from './support.js';

/** Tokens, bad input and isolation between installations, on every trigger route. */

const world = useTriggersWorld();
let a: TestInstallation;
let b: TestInstallation;
let bTrigger: { id: string; composioTriggerId: string; body: unknown };

beforeAll(async () => {
  a = await installationWithAccount(world);
  b = await installationWithAccount(world);
  const created = await createTrigger(world, b, gmailBody(b.accountId, { filter: { from: 'b@example.com' } }));
  expect(created.statusCode).toBe(201);
  const row = await storedTrigger(world, created.json().id);
  bTrigger = { id: created.json().id, composioTriggerId: row!.composioTriggerId, body: created.json() };
});

/**
 * Nothing happened anywhere: no Composio call (or, with `reads`, only lookups), no row, and B's
 * trigger as it was on both sides.
 */
async function expectNothingChanged(action: () => Promise<unknown>, options: { reads?: boolean } = {}): Promise<void> {
  const calls = world.h.calls.length;
  const rows = await storedTriggerCount(world);
  const onComposio = JSON.stringify(world.h.sim.controls.state().triggers);
  await action();
  const made = callsSince(world, calls);
  if (options.reads) expect(made.filter((op) => !op.endsWith('.get'))).toEqual([]);
  else expect(made).toEqual([]);
  expect(await storedTriggerCount(world)).toBe(rows);
  expect(JSON.stringify(world.h.sim.controls.state().triggers)).toBe(onComposio);
  const bView = await world.t.app.inject({ method: 'GET', url: `/v1/triggers/${bTrigger.id}`, headers: b.auth });
  expect(bView.json()).toEqual(bTrigger.body);
}

const ROUTES = [
  ['POST', '/v1/triggers'],
  ['GET', '/v1/triggers'],
  ['GET', '/v1/triggers/00000000-0000-4000-8000-000000000000'],
  ['PATCH', '/v1/triggers/00000000-0000-4000-8000-000000000000'],
  ['DELETE', '/v1/triggers/00000000-0000-4000-8000-000000000000'],
] as const;

describe('tokens', () => {
  const headers = {
    missing: {},
    'not bearer': { authorization: `Basic ${'a'.repeat(64)}` },
    garbled: { authorization: 'Bearer not-a-token' },
    unknown: { authorization: `Bearer ${'0'.repeat(64)}` },
    'upper-case hex': { authorization: `Bearer ${'A'.repeat(64)}` },
  };
  for (const [method, url] of ROUTES) {
    for (const [what, header] of Object.entries(headers)) {
      it(`${method} ${url}: a ${what} token is 401, before the body is read`, async () => {
        await expectNothingChanged(async () => {
          const response = await world.t.app.inject({
            method,
            url,
            headers: { ...header, 'content-type': 'application/json' },
            // A body that is not even JSON: the token is refused first.
            ...(method === 'POST' || method === 'PATCH' ? { payload: '{not json' } : {}),
          });
          expect(response.statusCode).toBe(401);
          expect(response.json()).toEqual({ error: 'missing or invalid installation token', code: 'unauthorized' });
        });
      });
    }
  }
});

describe('bad input', () => {
  let patched = 0;
  const inject = (method: 'POST' | 'PATCH', url: string, payload: string | object, headers: Record<string, string> = {}) =>
    world.t.app.inject({ method, url, headers: { ...a.auth, 'content-type': 'application/json', ...headers }, payload });

  it.each([
    ['malformed JSON', '{"automationId": ', 400, 'invalid_json'],
    ['a JSON array', '[]', 400, 'invalid_request'],
    ['a JSON string', '"x"', 400, 'invalid_request'],
    ['an unknown field', { ...gmailBody('ca_1'), owner: 'me' }, 400, 'invalid_request'],
    ['a wrong type', { ...gmailBody('ca_1'), enabled: 'true' }, 400, 'invalid_request'],
    ['a missing field', { automationId: 'x' }, 400, 'invalid_request'],
    ['a prototype-poisoning key', '{"automationId":"x","__proto__":{"enabled":false}}', 400, 'forbidden_key'],
    ['a huge body', { ...gmailBody('ca_1'), config: { blob: 'x'.repeat(200_000) } }, 413, 'payload_too_large'],
  ])('POST with %s is %d, and nothing is written or asked', async (_what, payload, status, code) => {
    await expectNothingChanged(async () => {
      const response = await inject('POST', '/v1/triggers', payload);
      expect(response.statusCode).toBe(status);
      expect(response.json().code).toBe(code);
    });
  });

  it('POST names the offending field', async () => {
    const response = await inject('POST', '/v1/triggers', { ...gmailBody(a.accountId), filter: { from: 'x', cc: 'y' } });
    expect(response.json()).toEqual({
      error: 'body.filter.cc: is not a Gmail filter; use from, subject, label, words',
      code: 'invalid_request',
    });
  });

  it('POST with a text body is refused as not JSON, like any other media type', async () => {
    await expectNothingChanged(async () => {
      const response = await world.t.app.inject({
        method: 'POST',
        url: '/v1/triggers',
        headers: { ...a.auth, 'content-type': 'text/plain' },
        payload: 'hi',
      });
      expect(response.statusCode).toBe(415);
      expect(response.json().code).toBe('unsupported_media_type');
    });
  });

  it.each([
    ['malformed JSON', '{"enabled":', 400],
    ['an empty body', '', 400],
    ['an unknown field', { enabled: true, automationId: 'x' }, 400],
    ['a wrong type', { enabled: 'false' }, 400],
    ['a huge body', { enabled: true, pad: 'x'.repeat(200_000) }, 413],
  ])('PATCH with %s is %d for an own trigger, and changes nothing', async (_what, payload, status) => {
    patched += 1;
    const mine = await createTrigger(
      world,
      a,
      gmailBody(a.accountId, { automationId: `patch-${patched}`, filter: { subject: `patch ${patched}` } }),
    );
    const before = (await world.t.app.inject({ method: 'GET', url: `/v1/triggers/${mine.json().id}`, headers: a.auth })).json();
    await expectNothingChanged(async () => {
      const response = await inject('PATCH', `/v1/triggers/${mine.json().id}`, payload);
      expect(response.statusCode).toBe(status);
    });
    expect((await world.t.app.inject({ method: 'GET', url: `/v1/triggers/${mine.json().id}`, headers: a.auth })).json()).toEqual(before);
  });
});

describe('isolation: A never reaches B’s trigger', () => {
  it('does not list it', async () => {
    const list = await world.t.app.inject({ method: 'GET', url: '/v1/triggers', headers: a.auth });
    expect(list.json().triggers.map((t: { id: string }) => t.id)).not.toContain(bTrigger.id);
  });

  const ids = () => [bTrigger.id, bTrigger.id.toUpperCase(), bTrigger.composioTriggerId, `${bTrigger.id}/`];

  it('cannot read it, by its id, in any case, or by its Composio id', async () => {
    for (const id of ids()) {
      await expectNothingChanged(async () => {
        const response = await world.t.app.inject({ method: 'GET', url: `/v1/triggers/${id}`, headers: a.auth });
        expect(response.statusCode, id).toBe(404);
        expect(response.json()).toEqual({ error: 'no trigger with this id', code: 'trigger_not_found' });
      });
    }
  });

  it('cannot pause or resume it', async () => {
    for (const id of ids()) {
      for (const enabled of [false, true]) {
        await expectNothingChanged(async () => {
          const response = await world.t.app.inject({ method: 'PATCH', url: `/v1/triggers/${id}`, headers: a.auth, payload: { enabled } });
          expect(response.statusCode, id).toBe(404);
        });
      }
    }
    expect(composioTrigger(world, bTrigger.composioTriggerId)?.disabled_at).toBeNull();
  });

  it('cannot delete it', async () => {
    for (const id of ids()) {
      await expectNothingChanged(async () => {
        const response = await world.t.app.inject({ method: 'DELETE', url: `/v1/triggers/${id}`, headers: a.auth });
        expect(response.statusCode, id).toBe(404);
      });
    }
    expect(composioTrigger(world, bTrigger.composioTriggerId)).toBeDefined();
  });

  it('cannot take over its automation id or its account', async () => {
    // The same automationId under A is A's own automation: B's trigger is not returned.
    const own = await createTrigger(world, a, gmailBody(a.accountId, { filter: { from: 'b@example.com' } }));
    expect(own.statusCode).toBe(201);
    expect(own.json().id).not.toBe(bTrigger.id);
    // B's account, even with B's exact body, is not A's.
    await expectNothingChanged(
      async () => {
        const response = await createTrigger(
          world,
          a,
          gmailBody(b.accountId, { automationId: 'steal', filter: { from: 'b@example.com' } }),
        );
        expect(response.statusCode).toBe(404);
      },
      { reads: true },
    );
    await world.t.app.inject({ method: 'DELETE', url: `/v1/triggers/${own.json().id}`, headers: a.auth });
  });

  it('leaves B’s trigger working for B', async () => {
    const response = await world.t.app.inject({
      method: 'PATCH',
      url: `/v1/triggers/${bTrigger.id}`,
      headers: b.auth,
      payload: { enabled: true },
    });
    expect(response.statusCode).toBe(200);
    expect(response.json()).toEqual(bTrigger.body);
  });
});
