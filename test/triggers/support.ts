import { afterAll, beforeAll } from 'vitest';
import { triggerDailyUsage, triggers } from '../../src/db/schema.js';
import { composioUserIdFor } from '../../src/installations/tokens.js';
import { connectAccount, type Harness, startHarness } from '../composio/harness.js';
import { buildTestApp, register, type TestApp } from '../support/app.js';

/** One broker on its own database, talking to one simulator through the real SDK. */
export interface TriggersWorld {
  t: TestApp;
  h: Harness;
  close(): Promise<void>;
}

/**
 * The calling test file's world: started before its tests (and before the `beforeAll`s the file
 * registers after this call), closed after them (after the file's own `afterAll`s). The object
 * answered is filled in once it has started.
 */
export function useTriggersWorld(): TriggersWorld {
  const world = {} as TriggersWorld;
  beforeAll(async () => {
    Object.assign(world, await startTriggersWorld());
  });
  afterAll(async () => {
    if (world.close) await world.close();
  });
  return world;
}

async function startTriggersWorld(): Promise<TriggersWorld> {
  const h = await startHarness();
  // Every test registers installations of its own: more than the default registrations a minute.
  const t = await buildTestApp({ REGISTRATIONS_PER_MINUTE: '100000' }, { composio: h.gateway });
  return {
    t,
    h,
    async close() {
      await t.close();
      await h.close();
    },
  };
}

export interface TestInstallation {
  installationId: string;
  composioUserId: string;
  auth: { authorization: string };
  /** An ACTIVE account of this installation's Composio user, made through link and consent. */
  accountId: string;
}

let aliases = 0;

/** A registered installation with one connected account of `toolkit`. */
export async function installationWithAccount(world: TriggersWorld, toolkit = 'gmail'): Promise<TestInstallation> {
  const { installationId, auth } = await register(world.t.app);
  const composioUserId = composioUserIdFor(installationId);
  const { accountId } = await connectAccount(world.h, composioUserId, toolkit, `acct${++aliases}`);
  return { installationId, composioUserId, auth, accountId };
}

export function gmailBody(accountId: string, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    automationId: 'auto_mail',
    toolkit: 'gmail',
    triggerSlug: 'GMAIL_NEW_GMAIL_MESSAGE',
    connectedAccountId: accountId,
    ...overrides,
  };
}

/** A GitHub commit trigger's body, on `engine` of `ada` unless `overrides` say otherwise. */
export function githubCommitBody(accountId: string, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    automationId: 'auto_commits',
    toolkit: 'github',
    triggerSlug: 'GITHUB_COMMIT_EVENT',
    connectedAccountId: accountId,
    config: { owner: 'ada', repo: 'engine' },
    ...overrides,
  };
}

export async function createTrigger(world: TriggersWorld, who: TestInstallation, body: Record<string, unknown>) {
  return world.t.app.inject({ method: 'POST', url: '/v1/triggers', headers: who.auth, payload: body });
}

/** The trigger as Composio (the simulator) holds it, or undefined once deleted there. */
export function composioTrigger(world: TriggersWorld, composioTriggerId: string) {
  return world.h.sim.controls.state().triggers.find((t) => t.id === composioTriggerId);
}

/** The stored row behind an API trigger id (to learn its Composio id). */
export async function storedTrigger(world: TriggersWorld, id: string) {
  const rows = await world.t.database.db.select().from(triggers);
  return rows.find((r) => r.id === id);
}

export async function storedTriggerCount(world: TriggersWorld): Promise<number> {
  return (await world.t.database.db.select().from(triggers)).length;
}

export async function recordUsage(
  world: TriggersWorld,
  row: { triggerId: string; day: string; kept: number; skipped: number; skippedReason: string | null },
): Promise<void> {
  await world.t.database.db.insert(triggerDailyUsage).values(row);
}

/** Composio calls the gateway made, by operation, since `from` (an index into `h.calls`). */
export function callsSince(world: TriggersWorld, from: number): string[] {
  return world.h.calls.slice(from).map((c) => c.operation);
}
