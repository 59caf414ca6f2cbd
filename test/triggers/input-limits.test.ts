import { beforeAll, describe, expect, it } from 'vitest';
import { connectAccount } from '../composio/harness.js';
import { composioRequests } from '../connectors/support.js';
import { createTrigger, gmailBody, installationWithAccount, type TestInstallation, useTriggersWorld } from './support.js';

/**
 * Trigger input Postgres could not store is refused with `400` naming the field before any
 * Composio call (today it was a `500`, after a Composio create and delete).
 */

const world = useTriggersWorld();
let a: TestInstallation;
beforeAll(async () => {
  a = await installationWithAccount(world, 'github');
});

const githubBody = (overrides: Record<string, unknown>) => ({
  automationId: `auto_${Math.random().toString(36).slice(2)}`,
  toolkit: 'github',
  triggerSlug: 'GITHUB_COMMIT_EVENT',
  connectedAccountId: a.accountId,
  config: { owner: 'ada', repo: 'engine' },
  ...overrides,
});

describe('trigger filter and config Postgres cannot store', () => {
  const cases: [string, Record<string, unknown>, RegExp][] = [
    ['NUL in a filter value', { filter: { 'sender.login': 'a\u0000b' } }, /^body\.filter\.sender\.login: /],
    ['an unpaired surrogate in a filter value', { filter: { 'sender.login': 'cut \ud83d' } }, /^body\.filter\.sender\.login: /],
    ['NUL in a config value', { config: { owner: 'ada', repo: 'x\u0000' } }, /^body\.config\.repo: /],
    [
      'an unpaired surrogate deep in config',
      { config: { owner: 'ada', repo: 'r', extra: { list: ['ok', '\udc00'] } } },
      /^body\.config\.extra\.list\.1: /,
    ],
    ['an unpaired surrogate in a config key', { config: { owner: 'ada', repo: 'r', 'k\ud800': 1 } }, /^body\.config\.k/],
  ];
  for (const [what, overrides, field] of cases) {
    it(`refuses ${what} with 400 naming the field, calling Composio for nothing`, async () => {
      const before = world.h.sim.controls.requests().length;
      const response = await createTrigger(world, a, githubBody(overrides));
      expect(response.statusCode).toBe(400);
      expect(response.json()).toEqual({ error: expect.stringMatching(field), code: 'invalid_request' });
      expect(composioRequests(world.h, before)).toEqual([]);
    });
  }

  it('refuses a Gmail filter with NUL the same way', async () => {
    const gmail = await installationWithAccount(world, 'gmail');
    const before = world.h.sim.controls.requests().length;
    const response = await createTrigger(world, gmail, gmailBody(gmail.accountId, { filter: { subject: 'x\u0000y' } }));
    expect(response.statusCode).toBe(400);
    expect(response.json().error).toMatch(/^body\.filter\.subject: /);
    expect(composioRequests(world.h, before)).toEqual([]);
  });
});

describe('triggers per connected account', () => {
  it('accepts 10 on one account and refuses the 11th with 409 too_many_triggers, calling Composio for nothing', async () => {
    const b = await installationWithAccount(world, 'github');
    for (let i = 0; i < 10; i++) {
      const response = await createTrigger(world, b, {
        ...githubBody({ config: { owner: 'ada', repo: `repo${i}` } }),
        connectedAccountId: b.accountId,
      });
      expect(response.statusCode).toBe(201);
    }
    const before = world.h.sim.controls.requests().length;
    const response = await createTrigger(world, b, {
      ...githubBody({ config: { owner: 'ada', repo: 'one-more' } }),
      connectedAccountId: b.accountId,
    });
    expect(response.statusCode).toBe(409);
    expect(response.json()).toEqual({ error: expect.stringMatching(/10 triggers/), code: 'too_many_triggers' });
    expect(composioRequests(world.h, before)).toEqual([]);
    // Another account has its own allowance.
    const other = await installationWithAccount(world, 'github');
    const elsewhere = await createTrigger(world, other, {
      ...githubBody({ config: { owner: 'ada', repo: 'repo0' } }),
      connectedAccountId: other.accountId,
    });
    expect(elsewhere.statusCode).toBe(201);
  });

  it('refuses to move an 11th trigger onto a full account with PATCH, calling Composio for nothing', async () => {
    const c = await installationWithAccount(world, 'github');
    for (let i = 0; i < 10; i++) {
      const response = await createTrigger(
        world,
        c,
        githubBody({ automationId: `full_${i}`, connectedAccountId: c.accountId, config: { owner: 'ada', repo: `r${i}` } }),
      );
      expect(response.statusCode).toBe(201);
    }
    const { accountId: second } = await connectAccount(world.h, c.composioUserId, 'github', 'second');
    const moving = await createTrigger(world, c, {
      ...githubBody({ automationId: 'moving', config: { owner: 'ada', repo: 'elsewhere' } }),
      connectedAccountId: second,
    });
    expect(moving.statusCode).toBe(201);
    const before = world.h.sim.controls.requests().length;
    const response = await world.t.app.inject({
      method: 'PATCH',
      url: `/v1/triggers/${moving.json().id}`,
      headers: c.auth,
      payload: { connectedAccountId: c.accountId },
    });
    expect(response.statusCode).toBe(409);
    expect(response.json()).toEqual({ error: expect.stringMatching(/10 triggers/), code: 'too_many_triggers' });
    expect(composioRequests(world.h, before)).toEqual([]);
  });
});
