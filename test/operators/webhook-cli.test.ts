import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Simulator, startSimulator } from '../../src/sim/index.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { runCli } from './support.js';

let sim: Simulator;
let database: TestDatabase;
let env: Record<string, string>;
beforeAll(async () => {
  sim = await startSimulator({ apiKey: 'sim_cli_key', logger: false });
  database = await createTestDatabase();
  env = {
    DATABASE_URL: database.url,
    COMPOSIO_API_KEY: sim.apiKey,
    COMPOSIO_BASE_URL: sim.origin,
    COMPOSIO_WEBHOOK_SECRET: 'the-old-secret',
    PUBLIC_URL: 'https://broker.example',
  };
});
afterAll(async () => {
  await sim.close();
  await database.drop();
});

const storedSecrets = () =>
  database.sql<{ secret: string | null; expires_at: Date | null }[]>`select secret, expires_at from webhook_secrets order by id`;

describe('webhook commands', () => {
  it('subscribes the project to the brokers’ webhook URL, then rotates its secret', async () => {
    const subscribed = await runCli(['webhook', 'subscribe'], env);
    expect(subscribed.code).toBe(0);
    const secret = subscribed.stdout.trim();
    expect(secret.length).toBeGreaterThan(16);
    expect(subscribed.stderr).toContain('https://broker.example/v1/webhooks/composio');
    expect(sim.controls.state().webhookSubscriptions).toMatchObject([{ webhookUrl: 'https://broker.example/v1/webhooks/composio' }]);

    const again = await runCli(['webhook', 'subscribe'], env);
    expect(again.code).toBe(0);
    expect(sim.controls.state().webhookSubscriptions).toHaveLength(1);

    const before = Date.now();
    const rotated = await runCli(['webhook', 'rotate-secret'], env);
    expect(rotated.code).toBe(0);
    const fresh = rotated.stdout.trim();
    expect(fresh.length).toBeGreaterThan(16);
    expect(fresh).not.toBe(secret);
    expect(rotated.stderr).toMatch(/every broker accepts it now; the old ones are accepted until /);
    expect(rotated.stderr).not.toContain(fresh);
    // Stored for every broker: the new one until the next rotation, the environment's for 24 hours.
    const rows = await storedSecrets();
    expect(rows.map((r) => r.secret).sort()).toEqual([fresh, 'the-old-secret'].sort());
    expect(rows.find((r) => r.secret === fresh)!.expires_at).toBeNull();
    const oldExpiry = new Date(rows.find((r) => r.secret === 'the-old-secret')!.expires_at!).getTime();
    expect(oldExpiry - before).toBeGreaterThanOrEqual(24 * 3_600_000 - 1000);
    expect(oldExpiry - Date.now()).toBeLessThanOrEqual(24 * 3_600_000);

    // Rotating again: the previous new one now expires after the overlap asked for.
    const again2 = await runCli(['webhook', 'rotate-secret', '--keep-old-for', '90m'], env);
    expect(again2.code).toBe(0);
    const newest = again2.stdout.trim();
    const after = await storedSecrets();
    expect(after.find((r) => r.secret === newest)!.expires_at).toBeNull();
    const previous = new Date(after.find((r) => r.secret === fresh)!.expires_at!).getTime();
    expect(Math.abs(previous - Date.now() - 90 * 60_000)).toBeLessThan(60_000);
    // Every secret accepted before ends with the shorter overlap (never later than it was).
    expect(new Date(after.find((r) => r.secret === 'the-old-secret')!.expires_at!).getTime()).toBe(previous);
  });

  it('changes nothing when Composio refuses the rotation, and refuses a bad --keep-old-for', async () => {
    const before = await storedSecrets();
    sim.controls.injectFault({ status: 500, path: '/api/v3.1/webhook_subscriptions/', method: 'POST' });
    const failed = await runCli(['webhook', 'rotate-secret'], env);
    sim.controls.clearFaults();
    expect(failed.code).toBe(1);
    expect(await storedSecrets()).toEqual(before);

    for (const bad of ['0h', 'soon', '31d', '-1h']) {
      const refused = await runCli(['webhook', 'rotate-secret', `--keep-old-for=${bad}`], env);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toMatch(/--keep-old-for must be a duration/);
    }
    expect(await storedSecrets()).toEqual(before);
  });

  it('explains what is missing instead of guessing', async () => {
    const noUrl = await runCli(['webhook', 'subscribe'], { ...env, PUBLIC_URL: '' });
    expect(noUrl.code).toBe(1);
    expect(noUrl.stderr).toMatch(/PUBLIC_URL is not set/);
    const sandbox = await runCli(['webhook', 'rotate-secret'], { PUBLIC_URL: 'https://broker.example' });
    expect(sandbox.code).toBe(1);
    expect(sandbox.stderr).toMatch(/COMPOSIO_API_KEY is not set/);
  });
});
