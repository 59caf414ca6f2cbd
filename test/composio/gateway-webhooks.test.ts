import { afterEach, describe, expect, it } from 'vitest';
import { verifyWebhookSignature } from '../../src/composio/index.js';
import { startReceiver } from '../sim/receiver.js';
import { connectAccount, type Harness, startHarness } from './harness.js';

/** The project's webhook subscription and the toolkit catalog. */

let h: Harness;
let receiver: Awaited<ReturnType<typeof startReceiver>> | undefined;
afterEach(async () => {
  await h?.close();
  await receiver?.close();
});

describe('webhook subscription', () => {
  it('creates the subscription once, then updates it in place', async () => {
    h = await startHarness();
    const created = await h.gateway.setWebhookSubscription('http://127.0.0.1:1/v1/webhooks/composio');
    expect(created).toEqual({ id: expect.any(String), created: true, secret: expect.any(String) });
    const updated = await h.gateway.setWebhookSubscription('http://127.0.0.1:2/v1/webhooks/composio');
    expect(updated.id).toBe(created.id);
    // The update's answer holds the secret masked: it is not passed on as a secret.
    expect(updated).toEqual({ id: created.id, created: false });
    expect(h.sim.controls.state().webhookSubscriptions).toEqual([
      {
        id: created.id,
        webhookUrl: 'http://127.0.0.1:2/v1/webhooks/composio',
        version: 'V3',
        enabledEvents: ['composio.trigger.message', 'composio.connected_account.expired', 'composio.trigger.disabled'],
        createdAt: expect.any(String),
      },
    ]);
    expect(h.sim.controls.requests().map((r) => `${r.method} ${r.path} ${r.status}`)).toEqual([
      'GET /api/v3.1/webhook_subscriptions 200',
      'POST /api/v3.1/webhook_subscriptions 201',
      'GET /api/v3.1/webhook_subscriptions 200',
      `PATCH /api/v3.1/webhook_subscriptions/${created.id} 200`,
    ]);
  });

  it('rotates the secret: deliveries are signed with the new one', async () => {
    h = await startHarness();
    receiver = await startReceiver();
    const { id, secret: oldSecret } = await h.gateway.setWebhookSubscription(receiver.url);
    const { secret } = await h.gateway.rotateWebhookSecret(id);
    expect(secret).not.toBe(oldSecret);

    const { accountId } = await connectAccount(h, 'omb_user1', 'gmail', 'work');
    const { triggerId } = await h.gateway.upsertTrigger({
      userId: 'omb_user1',
      slug: 'GMAIL_NEW_GMAIL_MESSAGE',
      connectedAccountId: accountId,
      config: {},
    });
    await h.sim.controls.fireTrigger(triggerId);
    const delivery = receiver.received[0];
    const input = {
      id: String(delivery?.headers['webhook-id']),
      timestamp: String(delivery?.headers['webhook-timestamp']),
      signatureHeader: String(delivery?.headers['webhook-signature']),
      rawBody: delivery?.body ?? Buffer.alloc(0),
      nowSeconds: Math.floor(Date.now() / 1000),
    };
    expect(verifyWebhookSignature({ ...input, secrets: [secret] })).toEqual({ ok: true });
    expect(verifyWebhookSignature({ ...input, secrets: [oldSecret ?? ''] })).toEqual({ ok: false, reason: 'bad_signature' });
  });

  it('gets the secret in full only from create and rotate; list, get and update answer it masked, as Composio does', async () => {
    h = await startHarness();
    const { id, secret } = await h.gateway.setWebhookSubscription('http://127.0.0.1:1/v1/webhooks/composio');
    const api = async (method: string, path: string, body?: unknown) => {
      const response = await fetch(`${h.sim.origin}/api/v3.1/webhook_subscriptions${path}`, {
        method,
        headers: { 'x-api-key': h.sim.apiKey, ...(body ? { 'content-type': 'application/json' } : {}) },
        ...(body ? { body: JSON.stringify(body) } : {}),
      });
      return (await response.json()) as { secret?: string; items?: { secret: string }[] };
    };
    const mask = `whsec_****${secret!.slice(-4)}`;
    expect((await api('GET', '')).items?.map((s) => s.secret)).toEqual([mask]);
    expect((await api('GET', `/${id}`)).secret).toBe(mask);
    expect((await api('PATCH', `/${id}`, { webhook_url: 'http://127.0.0.1:3/h' })).secret).toBe(mask);
    const rotated = await api('POST', `/${id}/rotate_secret`);
    expect(rotated.secret).not.toContain('*');
    expect(rotated.secret).toBe(h.sim.controls.webhookSecret(id));
    expect((await api('GET', `/${id}`)).secret).toBe(`whsec_****${rotated.secret!.slice(-4)}`);
  });

  it('says not found when rotating an unknown subscription', async () => {
    h = await startHarness();
    await expect(h.gateway.rotateWebhookSecret('ws_nope')).rejects.toMatchObject({ code: 'composio_not_found' });
  });
});

describe('catalog', () => {
  it('returns Composio’s v3 toolkit catalog as-is, every page of it as one', async () => {
    h = await startHarness();
    const catalog = (await h.gateway.getCatalog()) as {
      items: { slug: string; no_auth: boolean; composio_managed_auth_schemes: string[] }[];
      next_cursor: unknown;
      total_items: number;
    };
    expect(catalog.items.map((t) => t.slug).slice(0, 6)).toEqual(['gmail', 'slack', 'github', 'googlecalendar', 'hackernews', 'xero']);
    expect(new Set(catalog.items.map((t) => t.slug)).size).toBe(1000);
    expect(catalog).toMatchObject({ next_cursor: null, total_pages: 1, current_page: 1, total_items: 1000 });
    expect(catalog.items.find((t) => t.slug === 'xero')?.composio_managed_auth_schemes).toEqual([]);
    expect(catalog.items.find((t) => t.slug === 'hackernews')?.no_auth).toBe(true);
    const [request, ...more] = h.sim.controls.requests();
    expect(`${request?.path}?${request?.query}`).toBe('/api/v3/toolkits?limit=1000&sort_by=usage');
    expect(more).toEqual([]);
  });
});
