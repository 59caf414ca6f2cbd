import { Composio } from '@composio/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Simulator, startSimulator } from '../../src/sim/index.js';
import { startReceiver } from './receiver.js';

/**
 * The simulator against the SDK's own parsers, beyond the calls the broker's adapter makes:
 * if a shape drifted from Composio's, core would throw or log "Transform validation failed".
 * (The only place outside src/composio that touches the SDK: it is what is being imitated.)
 */

let sim: Simulator;
let composio: Composio;
const sdkLog: string[] = [];
const capture = (...args: unknown[]) => void sdkLog.push(args.map(String).join(' '));

beforeAll(async () => {
  sim = await startSimulator({ apiKey: 'sim_fidelity', logger: false });
  composio = new Composio({
    apiKey: sim.apiKey,
    baseURL: sim.origin,
    allowTracking: false,
    disableVersionCheck: true,
    logger: { error: capture, warn: capture, info: () => {}, debug: () => {} },
    logLevel: 'warn',
  });
});
afterAll(async () => sim.close());

describe('the real SDK against the simulator', () => {
  it('runs a Session end to end: create, use, toolkits, authorize, wait for the connection', async () => {
    const session = await composio.create('omb_fidelity', {
      manageConnections: { enable: true, waitForConnections: true },
      multiAccount: { enable: true, maxAccountsPerToolkit: 5 },
      mcp: true,
    });
    expect(session.mcp.url).toBe(`${sim.origin}/tool_router/${session.sessionId}/mcp`);
    expect(session.mcp.headers).toEqual({ 'x-api-key': 'sim_fidelity' });

    const reused = await composio.use(session.sessionId, { mcp: true });
    expect(reused.mcp.headers).toEqual({ 'x-api-key': 'sim_fidelity' });

    const request = await reused.authorize('gmail', { alias: 'work' });
    expect(request.redirectUrl).toContain('/_sim/connect/');
    sim.controls.authorizeLink(new URL(request.redirectUrl ?? '').pathname.split('/').pop() ?? '');
    const connected = await request.waitForConnection(5_000);
    expect(connected).toMatchObject({ id: request.id, status: 'ACTIVE', alias: 'work', toolkit: { slug: 'gmail' } });

    const toolkits = await reused.toolkits({ toolkits: ['gmail', 'slack'] });
    expect(toolkits.items.map((t) => [t.slug, t.connection?.isActive ?? false])).toEqual([
      ['gmail', true],
      ['slack', false],
    ]);
  });

  it('reads connected accounts and auth configs without validation warnings', async () => {
    const list = await composio.connectedAccounts.list({ userIds: ['omb_fidelity'], statuses: ['ACTIVE'] });
    expect(list.items).toHaveLength(1);
    const account = await composio.connectedAccounts.get(list.items[0]?.id ?? '');
    expect(account.state).toMatchObject({ authScheme: 'OAUTH2', val: { status: 'ACTIVE' } });
    const configs = await composio.authConfigs.list({ toolkit: 'gmail' });
    expect(configs.items).toMatchObject([{ toolkit: { slug: 'gmail' }, isComposioManaged: true, status: 'ENABLED' }]);
  });

  it('manages triggers and parses the simulator’s signed V3 webhook', async () => {
    const receiver = await startReceiver();
    try {
      const subscription = await composio.webhooks.subscriptions.set({ webhookUrl: receiver.url });
      expect(subscription).toMatchObject({ webhookUrl: receiver.url, version: 'V3', enabledEvents: ['composio.trigger.message'] });
      expect((await composio.webhooks.subscriptions.listEventTypes()).items.length).toBeGreaterThan(0);
      const rotated = await composio.webhooks.subscriptions.rotateSecret(subscription.id);

      const types = await composio.triggers.listTypes({ toolkits: ['gmail'] });
      expect(types.items.map((t) => t.slug)).toEqual(['GMAIL_NEW_GMAIL_MESSAGE']);
      const [account] = (await composio.connectedAccounts.list({ userIds: ['omb_fidelity'] })).items;
      const { triggerId } = await composio.triggers.create('omb_fidelity', 'GMAIL_NEW_GMAIL_MESSAGE', {
        connectedAccountId: account?.id ?? '',
        triggerConfig: { labelIds: 'INBOX', interval: 15 },
      });
      await composio.triggers.disable(triggerId);
      await composio.triggers.enable(triggerId);
      const active = await composio.triggers.listActive({ triggerIds: [triggerId] });
      expect(active.items).toMatchObject([{ id: triggerId, triggerName: 'GMAIL_NEW_GMAIL_MESSAGE', disabledAt: null }]);

      await sim.controls.fireTrigger(triggerId, { subject: 'Hello' });
      const delivery = receiver.received[0];
      const verified = await composio.triggers.verifyWebhook({
        id: delivery?.headers['webhook-id'] as string,
        timestamp: delivery?.headers['webhook-timestamp'] as string,
        signature: delivery?.headers['webhook-signature'] as string,
        payload: delivery?.body.toString('utf8') ?? '',
        secret: rotated.secret,
      });
      expect(verified.version).toBe('V3');
      expect(verified.payload).toMatchObject({
        id: triggerId,
        triggerSlug: 'GMAIL_NEW_GMAIL_MESSAGE',
        userId: 'omb_fidelity',
        payload: { subject: 'Hello' },
      });

      await composio.triggers.delete(triggerId);
    } finally {
      await receiver.close();
    }
  });

  it('lists the toolkit catalog', async () => {
    const toolkits = await composio.toolkits.get({});
    expect(toolkits.map((t) => t.slug)).toContain('gmail');
  });

  it('logged no SDK warnings along the way', () => {
    expect(sdkLog).toEqual([]);
  });
});
