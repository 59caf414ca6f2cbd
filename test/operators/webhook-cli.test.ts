import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storedSecrets as storedWebhookSecrets } from '../../src/events/intake/webhook-secrets.js';
import { type Simulator, startSimulator } from '../../src/sim/index.js';
import { buildEventsApp, type EventsTestApp, post, signed } from '../events/helpers.js';
import { TEST_DATA_KEYS, testDataKeys } from '../support/data-keys.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { until } from '../support/http.js';
import { runCli } from './support.js';

let sim: Simulator;
let database: TestDatabase;
let env: Record<string, string>;
beforeAll(async () => {
  sim = await startSimulator({ apiKey: 'sim_cli_key', logger: false });
  database = await createTestDatabase();
  // No COMPOSIO_WEBHOOK_SECRET: the webhook commands neither need nor read it.
  env = {
    DATABASE_URL: database.url,
    COMPOSIO_API_KEY: sim.apiKey,
    COMPOSIO_BASE_URL: sim.origin,
    PUBLIC_URL: 'https://broker.example',
  };
});
afterAll(async () => {
  await sim.close();
  await database.drop();
});

/** The stored secrets, opened where sealed (the brokers seal them at rest). */
const storedSecrets = async (on: TestDatabase = database) =>
  (await storedWebhookSecrets(on.db, testDataKeys())).map(({ secret, expiresAt }) => ({ secret, expires_at: expiresAt }));

/** A broker on `on` configured with `COMPOSIO_WEBHOOK_SECRET=secrets` (it stores them as accepted at start). */
const brokerWith = (on: TestDatabase, secrets: string) => buildEventsApp({ COMPOSIO_WEBHOOK_SECRET: secrets }, { database: on });

/** A webhook for no known trigger, signed with `secret`: 200 `unknown_trigger` if the broker accepts the secret, else 401. */
function probe(broker: EventsTestApp, secret: string) {
  const message = {
    id: `msg_probe_${Math.random().toString(36).slice(2)}`,
    timestamp: new Date().toISOString(),
    type: 'composio.trigger.message',
    metadata: { trigger_id: 'ti_nobody', trigger_slug: 'GMAIL_NEW_GMAIL_MESSAGE', connected_account_id: 'ca_x', user_id: 'omb_x' },
    data: {},
  };
  return post(broker, signed(message, { at: broker.clock.now(), secret })).then((response) => response.statusCode);
}

const masked = (value: string) => value.includes('*');

describe('webhook commands', () => {
  it('subscribes the project to the brokers’ webhook URL, then rotates its secret', async () => {
    const subscribed = await runCli(['webhook', 'subscribe'], env);
    expect(subscribed.code, subscribed.stderr).toBe(0);
    const secret = subscribed.stdout.trim();
    expect(secret.length).toBeGreaterThan(16);
    expect(masked(secret)).toBe(false);
    expect(subscribed.stderr).toContain('https://broker.example/v1/webhooks/composio');
    expect(subscribed.stderr).toMatch(/created; .* The signing secret above came with its creation/);
    expect(sim.controls.state().webhookSubscriptions).toMatchObject([{ webhookUrl: 'https://broker.example/v1/webhooks/composio' }]);
    const id = sim.controls.state().webhookSubscriptions[0]!.id;
    expect(secret).toBe(sim.controls.webhookSecret(id));
    // Creating stores nothing: the secret goes to the brokers' COMPOSIO_WEBHOOK_SECRET.
    expect(await storedSecrets()).toEqual([]);

    // The brokers start with it, and store it as accepted.
    const broker = await brokerWith(database, secret);
    let second: string;
    try {
      // Composio shows an existing subscription's secret only masked: the second run rotates
      // for a real one, says so, and stores it for the brokers, which accept it at once.
      const again = await runCli(['webhook', 'subscribe'], env);
      expect(again.code, again.stderr).toBe(0);
      expect(sim.controls.state().webhookSubscriptions).toHaveLength(1);
      second = again.stdout.trim();
      expect(masked(second)).toBe(false);
      expect(second).not.toBe(secret);
      expect(second).toBe(sim.controls.webhookSecret(id));
      expect(again.stderr).toMatch(
        /updated; .*Composio shows its secret only masked, so a new one is obtained by rotating it \(rotate_secret\)/,
      );
      expect(again.stderr).toMatch(/from rotate_secret: every broker accepts it now; the old ones are accepted until /);
      expect(again.stderr).not.toContain(second);
      const afterSubscribe = await storedSecrets();
      expect(afterSubscribe.map((r) => r.secret).sort()).toEqual([secret, second].sort());
      expect(afterSubscribe.some((r) => r.secret !== null && masked(r.secret))).toBe(false);
      expect(afterSubscribe.find((r) => r.secret === second)!.expires_at).toBeNull();
      expect(await probe(broker, second)).toBe(200);
      expect(await probe(broker, secret)).toBe(200);
    } finally {
      await broker.close();
    }

    const before = Date.now();
    const rotated = await runCli(['webhook', 'rotate-secret'], env);
    expect(rotated.code, rotated.stderr).toBe(0);
    const fresh = rotated.stdout.trim();
    expect(fresh.length).toBeGreaterThan(16);
    expect(fresh).not.toBe(second);
    expect(rotated.stderr).toMatch(/every broker accepts it now; the old ones are accepted until /);
    expect(rotated.stderr).not.toContain(fresh);
    // Stored for every broker: the new one until the next rotation, the ones accepted before for 24 hours.
    const rows = await storedSecrets();
    expect(rows.map((r) => r.secret).sort()).toEqual([fresh, second, secret].sort());
    expect(rows.find((r) => r.secret === fresh)!.expires_at).toBeNull();
    const oldExpiry = new Date(rows.find((r) => r.secret === second)!.expires_at!).getTime();
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
    expect(new Date(after.find((r) => r.secret === secret)!.expires_at!).getTime()).toBe(previous);
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

describe('a rotation run with COMPOSIO_WEBHOOK_SECRET in the operator’s shell', () => {
  it('adds only the secret Composio answered: the shell’s value stays refused, also after a restart', async () => {
    const own = await createTestDatabase();
    let broker = await brokerWith(own, 'the-brokers-secret');
    try {
      // As the README and /_sim rehearse it: a value the brokers never accepted.
      expect(await probe(broker, 'rehearsal')).toBe(401);
      const rotated = await runCli(['webhook', 'rotate-secret'], { ...env, DATABASE_URL: own.url, COMPOSIO_WEBHOOK_SECRET: 'rehearsal' });
      expect(rotated.code, rotated.stderr).toBe(0);
      const fresh = rotated.stdout.trim();
      const rows = await storedSecrets(own);
      expect(rows.map((r) => r.secret).sort()).toEqual(['the-brokers-secret', fresh].sort());
      // The brokers' own secret was accepted: it gets an end; the new one has none.
      expect(rows.find((r) => r.secret === 'the-brokers-secret')!.expires_at).not.toBeNull();
      expect(rows.find((r) => r.secret === fresh)!.expires_at).toBeNull();

      expect(await probe(broker, fresh)).toBe(200);
      expect(await probe(broker, 'the-brokers-secret')).toBe(200);
      expect(await probe(broker, 'rehearsal')).toBe(401);
      await broker.close();
      broker = await brokerWith(own, 'the-brokers-secret');
      expect(await probe(broker, 'rehearsal')).toBe(401);
      expect(await probe(broker, fresh)).toBe(200);
    } finally {
      await broker.close();
      await own.drop();
    }
  });

  it('runs without COMPOSIO_WEBHOOK_SECRET at all, as subscribe does', async () => {
    const own = await createTestDatabase();
    try {
      const rotated = await runCli(['webhook', 'rotate-secret'], { ...env, DATABASE_URL: own.url });
      expect(rotated.code, rotated.stderr).toBe(0);
      expect((await storedSecrets(own)).map((r) => r.secret)).toEqual([rotated.stdout.trim()]);
    } finally {
      await own.drop();
    }
  });

  it('stores the new secret encrypted from the first when given the brokers’ data key, in clear under any other key', async () => {
    const own = await createTestDatabase();
    // A broker that encrypts under the key `test`, recorded in use at its start; then none runs,
    // so nothing but the command writes the secrets.
    let broker = await brokerWith(own, 'the-brokers-secret');
    await until(async () => (await own.sql`select 1 from data_keys_in_use where key_id = 'test'`).length === 1, 5_000, 'the key in use');
    await broker.close();
    try {
      const stored = (secret: string) =>
        own.sql<{ secret: string | null; sealed: boolean }[]>`
          select secret, sealed is not null as sealed from webhook_secrets
           where secret = ${secret} or digest = encode(sha256(convert_to(${secret}, 'UTF8')), 'hex')`;

      const rotated = await runCli(['webhook', 'rotate-secret'], { ...env, DATABASE_URL: own.url, DATA_ENCRYPTION_KEYS: TEST_DATA_KEYS });
      expect(rotated.code, rotated.stderr).toBe(0);
      const fresh = rotated.stdout.trim();
      expect(await stored(fresh)).toEqual([{ secret: null, sealed: true }]);
      expect(rotated.stderr).toContain('It was stored encrypted under the data key the brokers use');

      // A key of the command's own, which no broker has: in clear, for the brokers to encrypt with theirs.
      const unused = `unused:${randomBytes(32).toString('base64')},${TEST_DATA_KEYS}`;
      const again = await runCli(['webhook', 'rotate-secret'], { ...env, DATABASE_URL: own.url, DATA_ENCRYPTION_KEYS: unused });
      expect(again.code, again.stderr).toBe(0);
      const newest = again.stdout.trim();
      expect(await stored(newest)).toEqual([{ secret: newest, sealed: false }]);
      expect(again.stderr).toContain('It was stored in clear, and the brokers encrypt it at their next read');
      // The brokers' key id with other bytes (mistyped): it opens none of their secrets, so in clear too.
      const mistyped = await runCli(['webhook', 'rotate-secret'], {
        ...env,
        DATABASE_URL: own.url,
        DATA_ENCRYPTION_KEYS: `test:${randomBytes(32).toString('base64')}`,
      });
      expect(mistyped.code, mistyped.stderr).toBe(0);
      const third = mistyped.stdout.trim();
      expect(await stored(third)).toEqual([{ secret: third, sealed: false }]);

      broker = await brokerWith(own, 'the-brokers-secret');
      expect(await probe(broker, fresh)).toBe(200);
      expect(await probe(broker, newest)).toBe(200);
      expect(await probe(broker, third)).toBe(200);
      await until(async () => (await stored(third))[0]?.sealed === true, 5_000, 'the broker encrypting it');
      expect(await stored(third)).toEqual([{ secret: null, sealed: true }]);
    } finally {
      await broker.close();
      await own.drop();
    }
  });
});
