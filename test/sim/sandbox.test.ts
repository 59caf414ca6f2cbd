import { type AddressInfo, createServer } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createComposioGateway, verifyWebhookSignature } from '../../src/composio/index.js';
import { type Sandbox, startSandbox } from '../../src/sim/index.js';
import { silentLogger } from '../composio/harness.js';
import { startReceiver } from './receiver.js';

/** Sandbox mode: simulator, generated key, subscription made through the adapter, banner. */

let sandbox: Sandbox | undefined;
let receiver: Awaited<ReturnType<typeof startReceiver>> | undefined;
afterEach(async () => {
  await sandbox?.close();
  await receiver?.close();
});

describe('startSandbox', () => {
  it('registers the broker’s webhook URL and hands back the secret the simulator signs with', async () => {
    receiver = await startReceiver();
    sandbox = await startSandbox({ logger: silentLogger, brokerWebhookUrl: receiver.url });
    expect(sandbox.baseUrl).toBe(sandbox.simulator.origin);
    expect(sandbox.apiKey).toMatch(/^sim_[A-Za-z0-9_-]{32}$/);
    expect(sandbox.simulator.controls.state().webhookSubscriptions).toMatchObject([
      { webhookUrl: receiver.url, version: 'V3', enabledEvents: ['composio.trigger.message', 'composio.connected_account.expired'] },
    ]);

    // A person connects Gmail in the sandbox; the expiry event verifies with the sandbox secret.
    const gateway = createComposioGateway({
      apiKey: sandbox.apiKey,
      baseUrl: sandbox.baseUrl,
      callsPerMinute: 600,
      timeoutMs: 2_000,
      logger: silentLogger,
    });
    const session = await gateway.createSession('omb_sandbox');
    const link = await gateway.createLink(session.sessionId, 'gmail', { alias: 'work' });
    sandbox.simulator.controls.authorizeLink(new URL(link.url).pathname.split('/').pop() ?? '');
    await sandbox.simulator.controls.expireAccount(link.connectedAccountId);
    const delivery = receiver.received[0];
    expect(
      verifyWebhookSignature({
        id: delivery?.headers['webhook-id'] as string,
        timestamp: delivery?.headers['webhook-timestamp'] as string,
        signatureHeader: delivery?.headers['webhook-signature'] as string,
        rawBody: delivery?.body ?? '',
        secrets: [sandbox.webhookSecret],
        nowSeconds: Math.floor(Date.now() / 1000),
      }),
    ).toEqual({ ok: true });
  });

  it('prints one banner naming sandbox mode, the simulator and its controls', async () => {
    sandbox = await startSandbox({ logger: silentLogger, brokerWebhookUrl: 'http://127.0.0.1:8787/v1/webhooks/composio' });
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
    sandbox = await startSandbox({ logger: silentLogger, brokerWebhookUrl: 'http://127.0.0.1:1/h', port });
    expect(sandbox.baseUrl).toBe(`http://127.0.0.1:${port}`);
  });
});

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
