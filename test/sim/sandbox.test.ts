import { type AddressInfo, createServer } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createComposioGateway } from '../../src/composio/index.js';
import { type Sandbox, startSandbox } from '../../src/sim/index.js';
import { silentLogger } from '../composio/harness.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { signedWith, startReceiver } from './receiver.js';

/** Sandbox mode: simulator, generated key, subscription made through the adapter, banner, kept world. */

let db: TestDatabase;
let sandbox: Sandbox | undefined;
let receiver: Awaited<ReturnType<typeof startReceiver>> | undefined;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});
afterEach(async () => {
  await sandbox?.close();
  sandbox = undefined;
  await receiver?.close();
  receiver = undefined;
  // Each test starts from a sandbox that has kept nothing yet.
  await db.sql`delete from sandbox.records`;
  await db.sql`delete from sandbox.project`;
});

const start = (options: { brokerWebhookUrl: string; port?: number }) => startSandbox({ logger: silentLogger, sql: db.sql, ...options });

/** A gateway on the sandbox's simulator, as the broker makes one. */
const gatewayOn = (running: Sandbox) =>
  createComposioGateway({ apiKey: running.apiKey, baseUrl: running.baseUrl, callsPerMinute: 600, timeoutMs: 2_000, logger: silentLogger });

describe('startSandbox', () => {
  it('registers the broker’s webhook URL and hands back the secret the simulator signs with', async () => {
    receiver = await startReceiver();
    sandbox = await start({ brokerWebhookUrl: receiver.url });
    expect(sandbox.baseUrl).toBe(sandbox.simulator.origin);
    expect(sandbox.apiKey).toMatch(/^sim_[A-Za-z0-9_-]{32}$/);
    expect(sandbox.simulator.controls.state().webhookSubscriptions).toMatchObject([
      {
        webhookUrl: receiver.url,
        version: 'V3',
        enabledEvents: ['composio.trigger.message', 'composio.connected_account.expired', 'composio.trigger.disabled'],
      },
    ]);

    // A person connects Gmail in the sandbox; the expiry event verifies with the sandbox secret.
    const gateway = gatewayOn(sandbox);
    const session = await gateway.createSession('omb_sandbox');
    const link = await gateway.createLink(session.sessionId, 'gmail', { alias: 'work' });
    sandbox.simulator.controls.authorizeLink(new URL(link.url).pathname.split('/').pop() ?? '');
    await sandbox.simulator.controls.expireAccount(link.connectedAccountId);
    const delivery = receiver.received[0];
    expect(signedWith(delivery, sandbox.webhookSecret)).toEqual({ ok: true });
  });

  it('points its webhooks at the broker’s new address when the broker moved, signing with the same secret', async () => {
    const before = await startReceiver();
    receiver = await startReceiver();
    try {
      sandbox = await start({ brokerWebhookUrl: before.url });
      const secret = sandbox.webhookSecret;
      await sandbox.deliverTo(receiver.url);
      expect(sandbox.simulator.controls.state().webhookSubscriptions).toMatchObject([{ webhookUrl: receiver.url }]);
      expect(sandbox.simulator.controls.webhookSecret(sandbox.simulator.controls.state().webhookSubscriptions[0]!.id)).toBe(secret);

      const gateway = gatewayOn(sandbox);
      const session = await gateway.createSession('omb_sandbox_moved');
      const link = await gateway.createLink(session.sessionId, 'gmail', {});
      sandbox.simulator.controls.authorizeLink(new URL(link.url).pathname.split('/').pop() ?? '');
      await sandbox.simulator.controls.expireAccount(link.connectedAccountId);
      expect(before.received).toEqual([]);
      const delivery = receiver.received[0];
      expect(signedWith(delivery, secret)).toEqual({ ok: true });
    } finally {
      await before.close();
    }
  });

  it('prints one banner naming sandbox mode, the simulator and its controls', async () => {
    sandbox = await start({ brokerWebhookUrl: 'http://127.0.0.1:8787/v1/webhooks/composio' });
    const banner = sandbox.bannerLines.join('\n');
    expect(banner).toMatch(/SANDBOX MODE/);
    expect(banner).toContain(sandbox.simulator.origin);
    expect(banner).toContain(`${sandbox.simulator.origin}/_sim`);
    expect(banner).toContain('http://127.0.0.1:8787/v1/webhooks/composio');
    expect(banner).not.toContain(sandbox.apiKey);
    expect(banner).not.toContain(sandbox.webhookSecret);
  });

  it('listens on the requested port', async () => {
    const port = await freePort();
    sandbox = await start({ brokerWebhookUrl: 'http://127.0.0.1:1/h', port });
    expect(sandbox.baseUrl).toBe(`http://127.0.0.1:${port}`);
  });
});

describe('the sandbox remembers', () => {
  it('takes up, after a restart on the same database, the project key, accounts, Sessions, links, triggers and the subscription', async () => {
    receiver = await startReceiver();
    const port = await freePort();
    sandbox = await start({ brokerWebhookUrl: receiver.url, port });
    expect(sandbox.restored).toBe(false);
    const gateway = () => gatewayOn(sandbox!);
    const session = await gateway().createSession('omb_remember');
    const work = await gateway().createLink(session.sessionId, 'gmail', { alias: 'work' });
    sandbox.simulator.controls.authorizeLink(new URL(work.url).pathname.split('/').pop() ?? '');
    const pending = await gateway().createLink(session.sessionId, 'gmail', { alias: 'home' });
    const trigger = await gateway().upsertTrigger({
      userId: 'omb_remember',
      slug: 'GMAIL_NEW_GMAIL_MESSAGE',
      connectedAccountId: work.connectedAccountId,
      config: { query: 'from:boss', interval: 15 },
    });
    const before = sandbox.simulator.controls.state();
    const { apiKey, webhookSecret } = sandbox;
    await sandbox.close();

    sandbox = await start({ brokerWebhookUrl: receiver.url, port });
    expect(sandbox.restored).toBe(true);
    expect(sandbox.apiKey).toBe(apiKey);
    expect(sandbox.webhookSecret).toBe(webhookSecret);
    const after = sandbox.simulator.controls.state();
    expect(after.project).toEqual(before.project);
    expect(after.accounts).toEqual(before.accounts);
    expect(after.sessions).toEqual(before.sessions);
    expect(after.links).toEqual(before.links);
    expect(after.triggers).toEqual(before.triggers);
    expect(after.authConfigs).toEqual(before.authConfigs);

    // Through the SDK, as the broker sees it: the account is ACTIVE, the trigger active.
    expect((await gateway().findConnectedAccount('omb_remember', work.connectedAccountId))?.status).toBe('ACTIVE');
    // The consent link from before the restart still opens (same port), and still works.
    const page = await fetch(pending.url);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('Authorize');
    // The trigger still fires (mail its query `from:boss` finds), signed with the same secret.
    const delivery = await sandbox.simulator.controls.fireTrigger(trigger.triggerId, {
      sender: 'The Boss <boss@example.com>',
      subject: 'Hi',
    });
    expect(delivery.ok).toBe(true);
    const received = receiver.received.at(-1);
    expect(signedWith(received, webhookSecret)).toEqual({ ok: true });
  });
});

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
