import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { createMetrics } from '../../src/metrics/metrics.js';
import { RECONCILE_LOCK, type ReconcileDeps, type ReconcileRun, reconcileTriggers } from '../../src/triggers/reconcile.js';
import { metricValue } from '../support/http.js';
import {
  composioTrigger,
  createTrigger,
  gmailBody,
  installationWithAccount,
  storedTrigger,
  type TestInstallation,
  useTriggersWorld,
} from './support.js';

/**
 * The broker reconciles its triggers with Composio's by itself: a trigger Composio lost is made
 * again under the same id for the app, one Composio stopped without a word is shown and
 * announced, one the app paused but Composio runs is paused again, and one on Composio that no
 * installation owns is deleted after the grace period; each repair counted in metrics.
 */

const world = useTriggersWorld();
const metrics = createMetrics({ defaultMetrics: false });
const log = createLogger('silent');
const HOUR = 3_600_000;

const deps = (): ReconcileDeps => ({
  db: world.t.database.db,
  sql: world.t.database.sql,
  composio: world.h.gateway,
  log,
  callsPerMinute: 600_000,
  timeoutMs: 2_000,
  onRepair: (kind) => metrics.triggerRepairs.inc({ kind }),
});
const reconcile = (now = new Date()): Promise<ReconcileRun> => reconcileTriggers(deps(), { now });
const repairsCounted = async (kind: string) => metricValue(await metrics.registry.metrics(), 'omb_trigger_repairs_total', { kind }) ?? 0;

/** Calls the simulator's API as the dashboard or another tool would, behind the broker's back. */
async function onComposio(method: 'PATCH' | 'DELETE', composioTriggerId: string, body?: unknown): Promise<number> {
  const response = await fetch(`${world.h.sim.origin}/api/v3.1/trigger_instances/manage/${composioTriggerId}`, {
    method,
    headers: { 'x-api-key': world.h.sim.apiKey, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return response.status;
}

async function newTrigger(who: TestInstallation, overrides: Record<string, unknown> = {}) {
  const response = await createTrigger(world, who, gmailBody(who.accountId, overrides));
  expect(response.statusCode).toBe(201);
  const trigger = response.json();
  return { trigger, composioTriggerId: (await storedTrigger(world, trigger.id))!.composioTriggerId };
}

const get = async (who: TestInstallation, id: string) =>
  (await world.t.app.inject({ method: 'GET', url: `/v1/triggers/${id}`, headers: who.auth })).json();
const poll = async (who: TestInstallation) =>
  (await world.t.app.inject({ method: 'GET', url: '/v1/events?wait=0', headers: who.auth })).json().events as Array<Record<string, any>>;

describe('reconciling with Composio', () => {
  it('makes a trigger Composio lost again, under the same id, on the same account and with the same query', async () => {
    const a = await installationWithAccount(world);
    const { trigger, composioTriggerId } = await newTrigger(a, { filter: { from: 'boss@example.com' } });
    const paused = await newTrigger(a, { automationId: 'paused', filter: { subject: 'x' }, enabled: false });
    expect(await onComposio('DELETE', composioTriggerId)).toBe(200);
    expect(await onComposio('DELETE', paused.composioTriggerId)).toBe(200);
    const counted = await repairsCounted('remade');

    const run = await reconcile();
    expect(run).toMatchObject({ ran: true, repairs: { remade: 2, failed: 0 } });
    expect(await repairsCounted('remade')).toBe(counted + 2);

    expect(await get(a, trigger.id)).toEqual(trigger);
    const remade = (await storedTrigger(world, trigger.id))!.composioTriggerId;
    expect(remade).not.toBe(composioTriggerId);
    expect(composioTrigger(world, remade)).toMatchObject({
      connected_account_id: a.accountId,
      disabled_at: null,
      trigger_config: expect.objectContaining({ query: 'from:"boss@example.com"' }),
    });
    // A paused one is made again paused.
    expect(composioTrigger(world, (await storedTrigger(world, paused.trigger.id))!.composioTriggerId)?.disabled_at).toEqual(
      expect.any(String),
    );
    expect((await reconcile()).repairs).toMatchObject({ remade: 0 });
  });

  it('shows and announces a lost trigger Composio will not make again (its account is gone)', async () => {
    const a = await installationWithAccount(world);
    const { trigger } = await newTrigger(a);
    // The account is deleted on Composio, and its triggers with it.
    const gone = await fetch(`${world.h.sim.origin}/api/v3.1/connected_accounts/${a.accountId}`, {
      method: 'DELETE',
      headers: { 'x-api-key': world.h.sim.apiKey },
    });
    expect(gone.status).toBe(200);

    expect((await reconcile()).repairs).toMatchObject({ remade: 0, failed: 1 });
    expect(await get(a, trigger.id)).toEqual({ ...trigger, status: 'disabled_by_composio', statusReason: 'lost_on_composio' });
    expect(await poll(a)).toEqual([
      expect.objectContaining({
        type: 'trigger.disabled',
        triggerId: trigger.id,
        data: { reason: 'lost_on_composio', status: 'disabled_by_composio' },
      }),
    ]);
    // Tried again on the next sweep, announced once.
    expect((await reconcile()).repairs).toMatchObject({ failed: 1 });
    expect(await poll(a)).toHaveLength(1);
  });

  it('shows and announces, once, a trigger Composio stopped without a webhook reaching the broker', async () => {
    const a = await installationWithAccount(world);
    const b = await installationWithAccount(world);
    const { trigger, composioTriggerId } = await newTrigger(a);
    await newTrigger(b);
    // No subscription asked for composio.trigger.disabled here: the broker hears nothing.
    expect((await world.h.sim.controls.disableTrigger(composioTriggerId, 'polling_failure_in_composio_infra')).delivery).toBeNull();
    expect((await get(a, trigger.id)).status).toBe('active');
    const counted = await repairsCounted('found_disabled');

    expect((await reconcile()).repairs).toMatchObject({ found_disabled: 1 });
    expect(await repairsCounted('found_disabled')).toBe(counted + 1);
    expect(await get(a, trigger.id)).toEqual({ ...trigger, status: 'disabled_by_composio', statusReason: 'disabled_on_composio' });
    const events = await poll(a);
    expect(events).toEqual([
      expect.objectContaining({
        id: expect.stringMatching(/^omb:trigger\.disabled:/),
        type: 'trigger.disabled',
        triggerId: trigger.id,
        data: { reason: 'disabled_on_composio', status: 'disabled_by_composio' },
      }),
    ]);
    expect(await poll(b)).toEqual([]);

    // Known now: the next sweep says nothing more.
    expect((await reconcile()).repairs).toMatchObject({ found_disabled: 0 });
    expect(await poll(a)).toHaveLength(1);

    // Running again on Composio (someone re-enabled it there): shown running.
    expect(await onComposio('PATCH', composioTriggerId, { status: 'enable' })).toBe(200);
    expect((await reconcile()).repairs).toMatchObject({ revived: 1 });
    expect((await get(a, trigger.id)).status).toBe('active');
  });

  it('pauses again on Composio a trigger the app paused', async () => {
    const a = await installationWithAccount(world);
    const { trigger, composioTriggerId } = await newTrigger(a, { enabled: false });
    expect(await onComposio('PATCH', composioTriggerId, { status: 'enable' })).toBe(200);
    expect((await reconcile()).repairs).toMatchObject({ repaused: 1 });
    expect(composioTrigger(world, composioTriggerId)?.disabled_at).toEqual(expect.any(String));
    expect((await get(a, trigger.id)).status).toBe('paused');
  });

  it('deletes a Composio trigger no installation owns, only after the grace period', async () => {
    const a = await installationWithAccount(world);
    const { trigger, composioTriggerId } = await newTrigger(a);
    // As after a database restore: the row is gone, the Composio trigger is not.
    await world.t.database.sql`delete from triggers where id = ${trigger.id}`;
    const counted = await repairsCounted('orphan_deleted');

    const now = new Date();
    expect((await reconcile(now)).repairs).toMatchObject({ orphan_deleted: 0 });
    expect(composioTrigger(world, composioTriggerId)).toBeDefined();
    expect((await reconcile(new Date(now.getTime() + 23 * HOUR))).repairs).toMatchObject({ orphan_deleted: 0 });
    expect(composioTrigger(world, composioTriggerId)).toBeDefined();

    expect((await reconcile(new Date(now.getTime() + 25 * HOUR))).repairs).toMatchObject({ orphan_deleted: 1 });
    expect(composioTrigger(world, composioTriggerId)).toBeUndefined();
    expect(await repairsCounted('orphan_deleted')).toBe(counted + 1);
    const [left] = await world.t.database.sql<
      { n: number }[]
    >`select count(*)::int as n from trigger_orphans where composio_trigger_id = ${composioTriggerId}`;
    expect(left!.n).toBe(0);
  });

  it('runs in one process at a time', async () => {
    // Another process's sweep, holding the lock on a connection of its own: started side by side,
    // two sweeps raced (the first could end before the second asked), so the other one is held here.
    const other = await world.t.database.sql.reserve();
    try {
      await other`select pg_advisory_lock(${RECONCILE_LOCK})`;
      expect((await reconcile()).ran).toBe(false);
      await other`select pg_advisory_unlock(${RECONCILE_LOCK})`;
    } finally {
      other.release();
    }
    expect((await reconcile()).ran).toBe(true);
  });
});
