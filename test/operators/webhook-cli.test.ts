import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Simulator, startSimulator } from '../../src/sim/index.js';
import { runCli } from './support.js';

let sim: Simulator;
let env: Record<string, string>;
beforeAll(async () => {
  sim = await startSimulator({ apiKey: 'sim_cli_key', logger: false });
  env = {
    COMPOSIO_API_KEY: sim.apiKey,
    COMPOSIO_BASE_URL: sim.origin,
    COMPOSIO_WEBHOOK_SECRET: 'the-old-secret',
    PUBLIC_URL: 'https://broker.example',
  };
});
afterAll(() => sim.close());

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

    const rotated = await runCli(['webhook', 'rotate-secret'], env);
    expect(rotated.code).toBe(0);
    const fresh = rotated.stdout.trim();
    expect(fresh.length).toBeGreaterThan(16);
    expect(fresh).not.toBe(secret);
    expect(rotated.stderr).toMatch(/COMPOSIO_WEBHOOK_SECRET="<new>,<old>"/);
    expect(rotated.stderr).not.toContain(fresh);
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
