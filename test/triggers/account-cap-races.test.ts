import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { triggers } from '../../src/db/schema.js';
import { connectAccount } from '../composio/harness.js';
import { buildTestApp, type TestApp } from '../support/app.js';
import { createTrigger, installationWithAccount, type TestInstallation, useTriggersWorld } from './support.js';

/**
 * The per-account cap (10 triggers) holds however creates interleave: in one process, across two
 * processes on one database, and for a move racing a create. Each loser hears
 * `409 too_many_triggers` and leaves nothing behind, here or on Composio.
 */

const world = useTriggersWorld();
/** A second broker on the same database and simulator: another process, as far as the cap can tell. */
let other: TestApp;
beforeAll(async () => {
  other = await buildTestApp({ REGISTRATIONS_PER_MINUTE: '100000' }, { database: world.t.database, composio: world.h.gateway });
});
afterAll(async () => {
  await other?.close();
});

let automations = 0;
/** A GitHub trigger of its own automation and repository (Composio keeps one trigger per configuration). */
const githubBody = (accountId: string) => {
  const n = ++automations;
  return {
    automationId: `auto_${n}`,
    toolkit: 'github',
    triggerSlug: 'GITHUB_COMMIT_EVENT',
    connectedAccountId: accountId,
    config: { owner: 'ada', repo: `repo${n}` },
  };
};

async function withTriggers(count: number): Promise<TestInstallation> {
  const who = await installationWithAccount(world, 'github');
  for (let i = 0; i < count; i++) expect((await createTrigger(world, who, githubBody(who.accountId))).statusCode).toBe(201);
  return who;
}

/** What the broker stores and what Composio holds on the account: the same triggers, both ways. */
async function onAccount(accountId: string) {
  const stored = await world.t.database.db.select().from(triggers).where(eq(triggers.connectedAccountId, accountId));
  const atComposio = world.h.sim.controls.state().triggers.filter((t) => t.connected_account_id === accountId);
  return { stored: stored.map((r) => r.composioTriggerId).sort(), atComposio: atComposio.map((t) => t.id).sort() };
}

function expectOutcome(answers: { statusCode: number; json(): { code?: string } }[], created: number) {
  expect(answers.filter((r) => r.statusCode === 201)).toHaveLength(created);
  const refused = answers.filter((r) => r.statusCode !== 201);
  expect(refused.map((r) => [r.statusCode, r.json().code])).toEqual(refused.map(() => [409, 'too_many_triggers']));
}

describe('creates racing for the last places on an account', () => {
  it('lets exactly 3 of 10 parallel creates onto an account with 7, in the broker and on Composio', async () => {
    const who = await withTriggers(7);
    const answers = await Promise.all(Array.from({ length: 10 }, () => createTrigger(world, who, githubBody(who.accountId))));
    expectOutcome(answers, 3);
    const { stored, atComposio } = await onAccount(who.accountId);
    expect(stored).toHaveLength(10);
    expect(atComposio).toEqual(stored);
  });

  it('holds across two brokers on one database: 10 creates split between them onto an account with 7', async () => {
    const who = await withTriggers(7);
    const answers = await Promise.all(
      Array.from({ length: 10 }, (_, i) => {
        const app = i % 2 === 0 ? world.t.app : other.app;
        return app.inject({ method: 'POST', url: '/v1/triggers', headers: who.auth, payload: githubBody(who.accountId) });
      }),
    );
    expectOutcome(answers, 3);
    const { stored, atComposio } = await onAccount(who.accountId);
    expect(stored).toHaveLength(10);
    expect(atComposio).toEqual(stored);
  });

  it('holds for a move racing a create onto an account with 9: one of them gets the last place', async () => {
    const who = await withTriggers(9);
    const { accountId: second } = await connectAccount(world.h, who.composioUserId, 'github', 'second');
    const moving = await createTrigger(world, who, githubBody(second));
    expect(moving.statusCode).toBe(201);

    const [moved, created] = await Promise.all([
      other.app.inject({
        method: 'PATCH',
        url: `/v1/triggers/${moving.json().id}`,
        headers: who.auth,
        payload: { connectedAccountId: who.accountId },
      }),
      createTrigger(world, who, githubBody(who.accountId)),
    ]);
    const answers = [moved, created];
    expect(answers.filter((r) => r.statusCode === 200 || r.statusCode === 201)).toHaveLength(1);
    expect(answers.filter((r) => r.statusCode === 409).map((r) => r.json().code)).toEqual(['too_many_triggers']);
    const { stored, atComposio } = await onAccount(who.accountId);
    expect(stored).toHaveLength(10);
    expect(atComposio).toEqual(stored);
    // A refused move leaves the trigger where it was, on Composio too.
    const left = await onAccount(second);
    expect(left.atComposio).toEqual(left.stored);
  });
});
