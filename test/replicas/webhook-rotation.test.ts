import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { createComposioGateway } from '../../src/composio/index.js';
import { rotateWebhookSecret, storedSecrets } from '../../src/events/intake/webhook-secrets.js';
import { composioUserIdFor } from '../../src/installations/tokens.js';
import { type Simulator, startSimulator } from '../../src/sim/index.js';
import { silentLogger } from '../composio/harness.js';
import { signed } from '../events/helpers.js';
import { spawnCli } from '../operators/support.js';
import { type BrokerProcess, startBroker } from '../support/broker-process.js';
import { testDataKeys } from '../support/data-keys.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { registerOver } from '../support/http.js';

/**
 * Rotating the webhook signing secret while two broker processes receive deliveries: Composio
 * (the simulator) delivers to a relay that posts every delivery to BOTH brokers, so each
 * delivery is checked by both and must be stored once. Deliveries signed with the old secret
 * keep coming too (retries signed before the rotation). Nothing is refused, nothing restarts.
 */

let sim: Simulator;
let database: TestDatabase;
let a: BrokerProcess;
let b: BrokerProcess;
let relay: Server;
let relayUrl: string;
let firstSecret: string;
let trigger: { composioTriggerId: string; connectedAccountId: string; composioUserId: string; installationId: string };

interface Delivered {
  id: string;
  statuses: number[];
  outcomes: string[];
}

async function post(url: string, message: { id: string; body: string; headers: Record<string, string> }) {
  const response = await fetch(`${url}/v1/webhooks/composio`, { method: 'POST', headers: message.headers, body: message.body });
  const text = await response.text();
  return { status: response.status, outcome: response.status === 200 ? (JSON.parse(text).outcome as string) : text };
}

/** Posts one delivery to both brokers at once. */
async function toBoth(message: { id: string; body: string; headers: Record<string, string> }): Promise<Delivered> {
  const answers = await Promise.all([post(a.url, message), post(b.url, message)]);
  return { id: message.id, statuses: answers.map((r) => r.status), outcomes: answers.map((r) => r.outcome) };
}

/** A trigger message as Composio would send it for our trigger, signed with `secret` by the test. */
function signedWith(secret: string) {
  return signed(
    {
      id: `msg_${Math.random().toString(36).slice(2)}`,
      timestamp: new Date().toISOString(),
      type: 'composio.trigger.message',
      metadata: {
        log_id: 'log_rotation',
        trigger_slug: 'GMAIL_NEW_GMAIL_MESSAGE',
        trigger_id: trigger.composioTriggerId,
        connected_account_id: trigger.connectedAccountId,
        auth_config_id: 'ac_rotation',
        user_id: trigger.composioUserId,
      },
      data: { subject: 'signed before the rotation' },
    },
    { secret },
  );
}

/** The pause after each delivery of the loops that run throughout the rotation. */
const DELIVERY_PAUSE_MS = 20;

const relayed: Delivered[] = [];

beforeAll(async () => {
  sim = await startSimulator({ apiKey: 'sim_rotation_key', logger: false });
  database = await createTestDatabase();
  relay = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      for (const name of ['webhook-id', 'webhook-timestamp', 'webhook-signature']) headers[name] = String(request.headers[name]);
      void toBoth({ id: headers['webhook-id']!, body: Buffer.concat(chunks).toString('utf8'), headers }).then((delivered) => {
        relayed.push(delivered);
        response.writeHead(delivered.statuses[0]!).end();
      });
    });
  });
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
  relayUrl = `http://127.0.0.1:${(relay.address() as AddressInfo).port}`;

  const subscription = await fetch(`${sim.origin}/api/v3.1/webhook_subscriptions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': sim.apiKey },
    body: JSON.stringify({ webhook_url: `${relayUrl}/v1/webhooks/composio`, enabled_events: ['composio.trigger.message'], version: 'V3' }),
  });
  expect(subscription.status).toBe(201);
  firstSecret = ((await subscription.json()) as { secret: string }).secret;

  const env = {
    DATABASE_URL: database.url,
    COMPOSIO_API_KEY: sim.apiKey,
    COMPOSIO_BASE_URL: sim.origin,
    COMPOSIO_WEBHOOK_SECRET: firstSecret,
  };
  [a, b] = await Promise.all([startBroker(env), startBroker(env)]);

  const who = await registerOver(a.url);
  const composioUserId = composioUserIdFor(who.installationId);
  const account = sim.controls.createAccount({ userId: composioUserId, toolkit: 'gmail', alias: 'work', status: 'ACTIVE' });
  const created = await fetch(`${a.url}/v1/triggers`, {
    method: 'POST',
    headers: { ...who.auth, 'content-type': 'application/json' },
    body: JSON.stringify({
      automationId: 'auto_rotation',
      toolkit: 'gmail',
      triggerSlug: 'GMAIL_NEW_GMAIL_MESSAGE',
      connectedAccountId: account.id,
    }),
  });
  expect(created.status, await created.clone().text()).toBe(201);
  const [row] = await database.sql<{ composio_trigger_id: string }[]>`select composio_trigger_id from triggers`;
  trigger = {
    composioTriggerId: row!.composio_trigger_id,
    connectedAccountId: account.id,
    composioUserId,
    installationId: who.installationId,
  };
}, 90_000);

afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop()]);
  await new Promise((resolve) => relay?.close(resolve));
  await sim?.close();
  await database?.drop();
}, 60_000);

async function storedIds(): Promise<string[]> {
  const rows = await database.sql<{ id: string }[]>`select id from events where installation_id = ${trigger.installationId} order by id`;
  return rows.map((r) => r.id);
}

/** Every delivery answered 200 by both brokers, and stored exactly once. */
async function expectAllAcceptedOnce(deliveries: Delivered[]): Promise<void> {
  for (const delivery of deliveries) {
    expect(delivery.statuses, `${delivery.id}: ${delivery.outcomes.join(' / ')}`).toEqual([200, 200]);
    expect([...delivery.outcomes].sort(), delivery.id).toEqual(['accepted', 'duplicate']);
  }
  const ids = await storedIds();
  expect(new Set(ids).size).toBe(ids.length);
  for (const delivery of deliveries) expect(ids).toContain(delivery.id);
}

describe('rotating the webhook secret with two brokers running', () => {
  it('refuses no delivery signed with the old or the new secret, stores each once, and refuses the old one after the overlap', async () => {
    const fromTest: Delivered[] = [];
    let rotating = true;
    // Composio keeps delivering (signed with whatever secret it has at that moment) and
    // deliveries signed with the first secret keep arriving, throughout the rotation.
    // Paced, so that they do not take the processor from the rotation they run beside.
    const composioLoop = (async () => {
      while (rotating) {
        await sim.controls.fireTrigger(trigger.composioTriggerId, { subject: 'during the rotation' });
        await sleep(DELIVERY_PAUSE_MS);
      }
    })();
    const oldLoop = (async () => {
      while (rotating) {
        fromTest.push(await toBoth(signedWith(firstSecret)));
        await sleep(DELIVERY_PAUSE_MS);
      }
    })();
    const stopped = () => {
      rotating = false;
      return Promise.all([composioLoop, oldLoop]).then(() => undefined);
    };
    onTestFinished(stopped);
    await new Promise((resolve) => setTimeout(resolve, 300));
    // An overlap just long enough to outlast the deliveries below (the CLI's exit, half a second
    // more, the checks), since the test then waits for it to end.
    const cli = await spawnCli(['webhook', 'rotate-secret', '--keep-old-for', '8s'], {
      DATABASE_URL: database.url,
      COMPOSIO_API_KEY: sim.apiKey,
      COMPOSIO_BASE_URL: sim.origin,
      COMPOSIO_WEBHOOK_SECRET: firstSecret,
      PUBLIC_URL: relayUrl,
    });
    expect(cli.code, cli.stderr).toBe(0);
    const newSecret = cli.stdout.trim();
    expect(newSecret.length).toBeGreaterThan(16);
    expect(newSecret).not.toBe(firstSecret);
    expect(cli.stderr).not.toContain(newSecret);
    await new Promise((resolve) => setTimeout(resolve, 500));
    await stopped();

    const all = [...relayed, ...fromTest];
    expect(relayed.length).toBeGreaterThan(3);
    expect(fromTest.length).toBeGreaterThan(3);
    await expectAllAcceptedOnce(all);

    // After the overlap (8 s from the rotation) the old secret is refused by both, with no
    // restart; the new one still works.
    const old = (await storedSecrets(database.db, testDataKeys())).find((row) => row.secret === firstSecret);
    const oldEnd = old!.expiresAt!.getTime();
    expect(oldEnd).toBeGreaterThan(Date.now());
    await new Promise((resolve) => setTimeout(resolve, oldEnd + 500 - Date.now()));
    const late = await toBoth(signedWith(firstSecret));
    expect(late.statuses).toEqual([401, 401]);
    const current = await toBoth(signedWith(newSecret));
    expect(current.statuses).toEqual([200, 200]);
    expect(await storedIds()).not.toContain(late.id);
    // Not logged anywhere.
    for (const broker of [a, b]) {
      expect(broker.output()).not.toContain(newSecret);
      expect(broker.output()).not.toContain(firstSecret);
    }
  }, 60_000);

  it('holds a delivery signed with the new secret that arrives before the secret is stored, instead of refusing it', async () => {
    relayed.length = 0;
    const gateway = createComposioGateway({
      apiKey: sim.apiKey,
      baseUrl: sim.origin,
      callsPerMinute: 600,
      timeoutMs: 5000,
      logger: silentLogger,
    });
    let early: Promise<unknown> | undefined;
    const rotation = await rotateWebhookSecret(
      {
        db: database.db,
        composio: {
          setWebhookSubscription: (url) => gateway.setWebhookSubscription(url),
          // Composio has switched to the new secret and delivers with it at once; the answer
          // (and so the secret) reaches the CLI only half a second later.
          rotateWebhookSecret: async (id) => {
            const answer = await gateway.rotateWebhookSecret(id);
            early = sim.controls.fireTrigger(trigger.composioTriggerId, { subject: 'signed with the brand-new secret' });
            await new Promise((resolve) => setTimeout(resolve, 500));
            return answer;
          },
        },
      },
      { webhookUrl: `${relayUrl}/v1/webhooks/composio`, keepOldForMs: 3_600_000, now: new Date() },
    );
    await early;
    expect(rotation.secret.length).toBeGreaterThan(16);
    expect(relayed).toHaveLength(1);
    await expectAllAcceptedOnce(relayed);
  }, 30_000);
});
