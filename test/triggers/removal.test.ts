import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { deleteInstallationTriggers } from '../../src/triggers/delete.js';
import { answered } from '../composio/harness.js';
import { LogCapture } from '../support/app.js';
import {
  composioTrigger,
  createTrigger,
  gmailBody,
  installationWithAccount,
  storedTrigger,
  type TestInstallation,
  useTriggersWorld,
} from './support.js';

/** `deleteInstallationTriggers`: what removing an installation does to its triggers. */

const world = useTriggersWorld();

async function withTriggers(count: number): Promise<{ who: TestInstallation; triggers: { id: string; composioTriggerId: string }[] }> {
  const who = await installationWithAccount(world);
  const triggers = [];
  for (let i = 0; i < count; i++) {
    const response = await createTrigger(world, who, gmailBody(who.accountId, { automationId: `auto_${i}`, filter: { subject: `s${i}` } }));
    expect(response.statusCode).toBe(201);
    const row = await storedTrigger(world, response.json().id);
    triggers.push({ id: row!.id, composioTriggerId: row!.composioTriggerId });
  }
  return { who, triggers };
}

describe('deleteInstallationTriggers', () => {
  it('deletes every trigger of the installation on Composio and here, and only those', async () => {
    const { who, triggers } = await withTriggers(6);
    const other = await withTriggers(1);
    const logs = new LogCapture();

    const result = await deleteInstallationTriggers(world.t.database.db, world.h.gateway, who.installationId, createLogger('info', logs));
    expect(result).toEqual({ deleted: 6 });
    for (const t of triggers) {
      expect(composioTrigger(world, t.composioTriggerId)).toBeUndefined();
      expect(await storedTrigger(world, t.id)).toBeUndefined();
    }
    expect(composioTrigger(world, other.triggers[0]!.composioTriggerId)).toBeDefined();
    expect(await storedTrigger(world, other.triggers[0]!.id)).toBeDefined();
    expect(logs.lines).toEqual([]);
  });

  it('counts a trigger already gone on Composio as deleted', async () => {
    const { who, triggers } = await withTriggers(2);
    await world.h.gateway.deleteTrigger(triggers[0]!.composioTriggerId);
    const result = await deleteInstallationTriggers(world.t.database.db, world.h.gateway, who.installationId, createLogger('silent'));
    expect(result).toEqual({ deleted: 2 });
    expect(composioTrigger(world, triggers[1]!.composioTriggerId)).toBeUndefined();
  });

  it('is nothing to do for an installation without triggers', async () => {
    const who = await installationWithAccount(world);
    expect(await deleteInstallationTriggers(world.t.database.db, world.h.gateway, who.installationId, createLogger('silent'))).toEqual({
      deleted: 0,
    });
  });

  it('tries every trigger, logs each failure and rethrows; a second run finishes the rest', async () => {
    const { who, triggers } = await withTriggers(3);
    const failing = triggers[1]!;
    world.h.sim.controls.injectFault({
      method: 'DELETE',
      path: `/api/v3.1/trigger_instances/manage/${failing.composioTriggerId}`,
      status: 500,
    });
    const logs = new LogCapture();

    await expect(
      answered(deleteInstallationTriggers(world.t.database.db, world.h.gateway, who.installationId, createLogger('info', logs))),
    ).rejects.toMatchObject({ status: 502, code: 'upstream_unavailable' });
    expect(composioTrigger(world, triggers[0]!.composioTriggerId)).toBeUndefined();
    expect(composioTrigger(world, triggers[2]!.composioTriggerId)).toBeUndefined();
    expect(composioTrigger(world, failing.composioTriggerId)).toBeDefined();
    expect(await storedTrigger(world, failing.id)).toBeDefined();
    expect(logs.lines).toHaveLength(1);
    expect(JSON.parse(logs.lines[0]!)).toMatchObject({
      level: 40,
      msg: 'could not delete a trigger of a removed installation',
      installationId: who.installationId,
      triggerId: failing.id,
      composioTriggerId: failing.composioTriggerId,
      code: 'upstream_unavailable',
    });

    expect(await deleteInstallationTriggers(world.t.database.db, world.h.gateway, who.installationId, createLogger('silent'))).toEqual({
      deleted: 1,
    });
    expect(composioTrigger(world, failing.composioTriggerId)).toBeUndefined();
  });
});
