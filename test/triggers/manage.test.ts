import { eq } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { utcDay } from '../../src/clock.js';
import { triggers } from '../../src/db/schema.js';
import {
  callsSince,
  composioTrigger,
  createTrigger,
  gmailBody,
  installationWithAccount,
  recordUsage,
  storedTrigger,
  type TestInstallation,
  useTriggersWorld,
} from './support.js';

/** Reading, pausing, resuming and deleting triggers; `status` and `today`. */

const world = useTriggersWorld();

async function newTrigger(who: TestInstallation, overrides: Record<string, unknown> = {}) {
  const response = await createTrigger(world, who, gmailBody(who.accountId, overrides));
  expect(response.statusCode).toBe(201);
  const trigger = response.json();
  const row = await storedTrigger(world, trigger.id);
  return { trigger, composioTriggerId: row!.composioTriggerId };
}

const call = (who: TestInstallation, method: 'GET' | 'PATCH' | 'DELETE', url: string, payload?: { enabled: boolean }) =>
  payload === undefined
    ? world.t.app.inject({ method, url, headers: who.auth })
    : world.t.app.inject({ method, url, headers: who.auth, payload });

describe('GET /v1/triggers', () => {
  it('lists this installation’s triggers in the order they were created', async () => {
    const a = await installationWithAccount(world);
    expect((await call(a, 'GET', '/v1/triggers')).json()).toEqual({ triggers: [] });
    const first = await newTrigger(a, { automationId: 'one', filter: { from: 'one@example.com' } });
    const second = await newTrigger(a, { automationId: 'two', filter: { from: 'two@example.com' } });

    const response = await call(a, 'GET', '/v1/triggers');
    expect(response.statusCode).toBe(200);
    expect(response.headers['cache-control']).toBe('no-store');
    expect(response.json()).toEqual({ triggers: [first.trigger, second.trigger] });
  });
});

describe('GET /v1/triggers/:id', () => {
  it('answers the trigger, also for an upper-case id', async () => {
    const a = await installationWithAccount(world);
    const { trigger } = await newTrigger(a);
    expect((await call(a, 'GET', `/v1/triggers/${trigger.id}`)).json()).toEqual(trigger);
    expect((await call(a, 'GET', `/v1/triggers/${trigger.id.toUpperCase()}`)).json()).toEqual(trigger);
  });

  it.each(['00000000-0000-4000-8000-000000000000', 'not-a-uuid', 'ti_abc', '1'])('is 404 for %s, without asking Composio', async (id) => {
    const a = await installationWithAccount(world);
    const before = world.h.calls.length;
    const response = await call(a, 'GET', `/v1/triggers/${id}`);
    expect(response.statusCode).toBe(404);
    expect(response.json()).toEqual({ error: 'no trigger with this id', code: 'trigger_not_found' });
    expect(callsSince(world, before)).toEqual([]);
  });
});

describe('PATCH /v1/triggers/:id', () => {
  it('pauses and resumes on Composio and here', async () => {
    const a = await installationWithAccount(world);
    const { trigger, composioTriggerId } = await newTrigger(a);

    const paused = await call(a, 'PATCH', `/v1/triggers/${trigger.id}`, { enabled: false });
    expect(paused.statusCode).toBe(200);
    expect(paused.json()).toEqual({ ...trigger, enabled: false, status: 'paused' });
    expect(composioTrigger(world, composioTriggerId)?.disabled_at).toEqual(expect.any(String));
    expect((await call(a, 'GET', `/v1/triggers/${trigger.id}`)).json()).toMatchObject({ enabled: false, status: 'paused' });

    const resumed = await call(a, 'PATCH', `/v1/triggers/${trigger.id}`, { enabled: true });
    expect(resumed.json()).toEqual(trigger);
    expect(composioTrigger(world, composioTriggerId)?.disabled_at).toBeNull();
  });

  it('asks Composio even when nothing changes, repairing a trigger switched there directly', async () => {
    const a = await installationWithAccount(world);
    const { trigger, composioTriggerId } = await newTrigger(a);
    await world.h.gateway.setTriggerEnabled(composioTriggerId, false);
    const response = await call(a, 'PATCH', `/v1/triggers/${trigger.id}`, { enabled: true });
    expect(response.statusCode).toBe(200);
    expect(composioTrigger(world, composioTriggerId)?.disabled_at).toBeNull();
  });

  it('keeps the stored state when Composio fails, so it never claims a pause that did not happen', async () => {
    const a = await installationWithAccount(world);
    const { trigger, composioTriggerId } = await newTrigger(a);
    world.h.sim.controls.injectFault({ method: 'PATCH', path: `/api/v3.1/trigger_instances/manage/${composioTriggerId}`, status: 500 });
    const response = await call(a, 'PATCH', `/v1/triggers/${trigger.id}`, { enabled: false });
    expect(response.statusCode).toBe(502);
    expect(await storedTrigger(world, trigger.id)).toMatchObject({ enabled: true });
  });

  it('says so when the trigger is gone on Composio', async () => {
    const a = await installationWithAccount(world);
    const { trigger, composioTriggerId } = await newTrigger(a);
    await world.h.gateway.deleteTrigger(composioTriggerId);
    const response = await call(a, 'PATCH', `/v1/triggers/${trigger.id}`, { enabled: false });
    expect(response.statusCode).toBe(409);
    expect(response.json()).toMatchObject({ code: 'trigger_gone' });
  });
});

describe('DELETE /v1/triggers/:id', () => {
  it('deletes on Composio, then here', async () => {
    const a = await installationWithAccount(world);
    const { trigger, composioTriggerId } = await newTrigger(a);
    const response = await call(a, 'DELETE', `/v1/triggers/${trigger.id}`);
    expect(response.statusCode).toBe(204);
    expect(response.body).toBe('');
    expect(composioTrigger(world, composioTriggerId)).toBeUndefined();
    expect(await storedTrigger(world, trigger.id)).toBeUndefined();
    expect((await call(a, 'GET', `/v1/triggers/${trigger.id}`)).statusCode).toBe(404);
    expect((await call(a, 'DELETE', `/v1/triggers/${trigger.id}`)).statusCode).toBe(404);
  });

  it('treats a trigger already gone on Composio as deleted there', async () => {
    const a = await installationWithAccount(world);
    const { trigger, composioTriggerId } = await newTrigger(a);
    await world.h.gateway.deleteTrigger(composioTriggerId);
    expect((await call(a, 'DELETE', `/v1/triggers/${trigger.id}`)).statusCode).toBe(204);
    expect(await storedTrigger(world, trigger.id)).toBeUndefined();
  });

  it('keeps the trigger when Composio fails, so a retry can finish the job', async () => {
    const a = await installationWithAccount(world);
    const { trigger, composioTriggerId } = await newTrigger(a);
    world.h.sim.controls.injectFault({ method: 'DELETE', path: `/api/v3.1/trigger_instances/manage/${composioTriggerId}`, status: 503 });
    expect((await call(a, 'DELETE', `/v1/triggers/${trigger.id}`)).statusCode).toBe(502);
    expect(await storedTrigger(world, trigger.id)).toBeDefined();
    expect(composioTrigger(world, composioTriggerId)).toBeDefined();
    expect((await call(a, 'DELETE', `/v1/triggers/${trigger.id}`)).statusCode).toBe(204);
    expect(composioTrigger(world, composioTriggerId)).toBeUndefined();
  });

  it('lets the automation create its trigger anew afterwards', async () => {
    const a = await installationWithAccount(world);
    const { trigger } = await newTrigger(a);
    await call(a, 'DELETE', `/v1/triggers/${trigger.id}`);
    const again = await createTrigger(world, a, gmailBody(a.accountId));
    expect(again.statusCode).toBe(201);
    expect(again.json().id).not.toBe(trigger.id);
  });
});

describe('status and today', () => {
  it('shows needs_reconnect once the account expired, whether enabled or paused', async () => {
    const a = await installationWithAccount(world);
    const { trigger } = await newTrigger(a);
    await world.t.database.db.update(triggers).set({ needsReconnectAt: new Date() }).where(eq(triggers.id, trigger.id));
    expect((await call(a, 'GET', `/v1/triggers/${trigger.id}`)).json()).toMatchObject({ enabled: true, status: 'needs_reconnect' });
    await world.t.database.db.update(triggers).set({ enabled: false }).where(eq(triggers.id, trigger.id));
    expect((await call(a, 'GET', `/v1/triggers/${trigger.id}`)).json()).toMatchObject({ enabled: false, status: 'needs_reconnect' });
  });

  it('counts the current UTC day of the app’s clock only', async () => {
    const a = await installationWithAccount(world);
    const { trigger } = await newTrigger(a);
    world.t.clock.set('2031-03-04T23:59:30Z');
    await recordUsage(world, { triggerId: trigger.id, day: '2031-03-03', kept: 99, skipped: 9, skippedReason: 'daily_limit' });
    await recordUsage(world, { triggerId: trigger.id, day: '2031-03-04', kept: 7, skipped: 2, skippedReason: 'daily_limit' });

    const today = { kept: 7, skipped: 2, skippedReason: 'daily_limit' };
    expect((await call(a, 'GET', `/v1/triggers/${trigger.id}`)).json().today).toEqual(today);
    expect((await call(a, 'GET', '/v1/triggers')).json().triggers[0].today).toEqual(today);
    expect((await call(a, 'PATCH', `/v1/triggers/${trigger.id}`, { enabled: false })).json().today).toEqual(today);
    expect((await createTrigger(world, a, gmailBody(a.accountId, { enabled: false }))).json().today).toEqual(today);

    // Past midnight (UTC) the day starts from zero.
    world.t.clock.advance(60_000);
    expect(utcDay(world.t.clock.now())).toBe('2031-03-05');
    expect((await call(a, 'GET', `/v1/triggers/${trigger.id}`)).json().today).toEqual({ kept: 0, skipped: 0, skippedReason: null });
  });
});
