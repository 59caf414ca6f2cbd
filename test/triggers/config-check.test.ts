import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ComposioGateway, TriggerType } from '../../src/composio/index.js';
import { startHarness } from '../composio/harness.js';
import { buildTestApp } from '../support/app.js';
import {
  callsSince,
  composioTrigger,
  createTrigger,
  gmailBody,
  installationWithAccount,
  storedTrigger,
  storedTriggerCount,
  type TestInstallation,
  type TriggersWorld,
} from './support.js';

/**
 * `config` is held against the trigger type's config schema, as the discovery cache has it, and
 * against the broker's own bounds: a refusal is `400` naming the field, before Composio is asked
 * to make anything.
 */

/**
 * A polled GitHub type the simulator does not have, added to what discovery answers: its schema
 * uses what Composio's schemas carry beyond the simulator's (enum through `$ref`, bounds, lists,
 * nullable fields, no other settings allowed). Only refusals reach it: Composio never hears of it.
 */
const STRICT_TYPE: TriggerType = {
  slug: 'GITHUB_ISSUES_POLL',
  toolkit: 'github',
  name: 'Issues',
  description: 'Polls a repository for issues.',
  type: 'poll',
  configSchema: {
    title: 'IssuesConfig',
    type: 'object',
    additionalProperties: false,
    required: ['owner', 'repo'],
    properties: {
      owner: { type: 'string', minLength: 1, title: 'Owner' },
      repo: { type: 'string', title: 'Repo' },
      interval: { type: 'integer', default: 15, maximum: 720, title: 'Interval' },
      state: { $ref: '#/$defs/IssueState', default: 'open' },
      labels: { anyOf: [{ type: 'array', items: { type: 'string' }, maxItems: 3 }, { type: 'null' }], default: null },
    },
    $defs: { IssueState: { type: 'string', enum: ['open', 'closed'], title: 'IssueState' } },
  },
  payloadSchema: { type: 'object', properties: {} },
};

let world: TriggersWorld;
let gmail: TestInstallation;
let github: TestInstallation;
beforeAll(async () => {
  const h = await startHarness();
  const composio: ComposioGateway = {
    ...h.gateway,
    listTriggerTypes: async (toolkit) => {
      const types = await h.gateway.listTriggerTypes(toolkit);
      return toolkit === 'github' ? [...types, STRICT_TYPE] : types;
    },
  };
  const t = await buildTestApp({ REGISTRATIONS_PER_MINUTE: '100000' }, { composio });
  world = {
    t,
    h,
    async close() {
      await t.close();
      await h.close();
    },
  };
  gmail = await installationWithAccount(world, 'gmail');
  github = await installationWithAccount(world, 'github');
});
afterAll(() => world?.close());

let automations = 0;
const githubBody = (triggerSlug: string, config: Record<string, unknown>) => ({
  automationId: `auto_${++automations}`,
  toolkit: 'github',
  triggerSlug,
  connectedAccountId: github.accountId,
  config,
});

/** A refused create: `400` with this sentence, no trigger made on Composio, nothing stored. */
async function expectRefused(who: TestInstallation, body: Record<string, unknown>, error: string) {
  const before = world.h.calls.length;
  const stored = await storedTriggerCount(world);
  const response = await createTrigger(world, who, body);
  expect(response.json()).toEqual({ error, code: 'invalid_request' });
  expect(response.statusCode).toBe(400);
  expect(callsSince(world, before)).not.toContain('triggers.upsert');
  expect(await storedTriggerCount(world)).toBe(stored);
}

describe('the polling interval', () => {
  it.each([1e308, 1441, 1e6])('refuses %d minutes: more than a day', async (interval) => {
    await expectRefused(
      gmail,
      gmailBody(gmail.accountId, { automationId: `mail_${++automations}`, config: { interval } }),
      'body.config.interval: must be at most 1440 minutes (a day)',
    );
  });

  it('accepts a day, sent to Composio as asked', async () => {
    const response = await createTrigger(world, gmail, gmailBody(gmail.accountId, { automationId: 'daily', config: { interval: 1440 } }));
    expect(response.statusCode).toBe(201);
    const row = await storedTrigger(world, response.json().id);
    expect(composioTrigger(world, row!.composioTriggerId)?.trigger_config).toMatchObject({ interval: 1440 });
  });
});

describe("the simulator's schemas", () => {
  it.each([
    ['a wrong type', { owner: 5, repo: 'engine' }, 'body.config.owner: must be a string'],
    ['a missing required field', { owner: 'ada' }, 'body.config.repo: is required'],
    [
      'a number too large to have arrived intact',
      { owner: 'ada', repo: 'engine', extra: { n: 1e20 } },
      'body.config.extra.n: must be between -9007199254740991 and 9007199254740991; larger numbers lose digits in JSON',
    ],
  ])('refuses %s (GitHub)', async (_what, config, error) => {
    await expectRefused(github, githubBody('GITHUB_COMMIT_EVENT', config), error);
  });

  it('refuses a Gmail setting of the wrong type', async () => {
    const body = gmailBody(gmail.accountId, { automationId: `mail_${++automations}`, config: { labelIds: ['INBOX'] } });
    await expectRefused(gmail, body, 'body.config.labelIds: must be a string');
  });
});

describe("a schema's enum, bounds, lists and closed settings", () => {
  it.each([
    ['an enum value it lacks (through $ref)', { state: 'merged' }, 'body.config.state: must be one of "open", "closed"'],
    [
      'a setting it does not have',
      { branch: 'main' },
      'body.config.branch: is not a setting of this trigger; use owner, repo, interval, state, labels',
    ],
    ['a number above its maximum', { interval: 900 }, 'body.config.interval: must be at most 720'],
    ['a fraction where it wants a whole number', { interval: 20.5 }, 'body.config.interval: must be a whole number'],
    ['an empty string where it wants one', { owner: '' }, 'body.config.owner: must not be empty'],
    ['a list item of the wrong type', { labels: ['bug', 7] }, 'body.config.labels.1: must be a string'],
    ['too many list items', { labels: ['a', 'b', 'c', 'd'] }, 'body.config.labels: must have at most 3 items'],
    ['a nullable field of another type', { labels: 'bug' }, 'body.config.labels: must be a list or null'],
  ])('refuses %s', async (_what, change, error) => {
    await expectRefused(github, githubBody(STRICT_TYPE.slug, { owner: 'ada', repo: 'engine', ...change }), error);
  });
});
