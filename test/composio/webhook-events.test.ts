import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseWebhookEvent } from '../../src/composio/index.js';
import { startReceiver } from '../sim/receiver.js';
import { connectAccount, type Harness, startHarness } from './harness.js';

/** The V3 payloads the broker routes, as the simulator delivers them. */

let h: Harness;
let receiver: Awaited<ReturnType<typeof startReceiver>>;

beforeAll(async () => {
  h = await startHarness();
  receiver = await startReceiver();
  await h.gateway.setWebhookSubscription(receiver.url);
});
afterAll(async () => {
  await h.close();
  await receiver.close();
});

describe('parseWebhookEvent', () => {
  it('reads a trigger message', async () => {
    const { accountId } = await connectAccount(h, 'omb_user1', 'gmail', 'work');
    const { triggerId } = await h.gateway.upsertTrigger({
      userId: 'omb_user1',
      slug: 'GMAIL_NEW_GMAIL_MESSAGE',
      connectedAccountId: accountId,
      config: {},
    });
    const delivery = await h.sim.controls.fireTrigger(triggerId, { subject: 'Hi' });
    const received = receiver.received.at(-1);
    expect(parseWebhookEvent(received?.body ?? '')).toEqual({
      ok: true,
      event: {
        type: 'composio.trigger.message',
        id: delivery.webhookId,
        timestamp: expect.any(String),
        triggerId,
        triggerSlug: 'GMAIL_NEW_GMAIL_MESSAGE',
        connectedAccountId: accountId,
        userId: 'omb_user1',
        data: { subject: 'Hi' },
      },
    });
  });

  it('reads an expired account, whose data names no user (Composio deprecates user_id)', async () => {
    const { accountId } = await connectAccount(h, 'omb_user2', 'slack', 'team');
    const { delivery } = await h.sim.controls.expireAccount(accountId);
    expect(delivery).toMatchObject({ ok: true, status: 200 });
    const parsed = parseWebhookEvent(receiver.received.at(-1)?.body ?? '');
    expect(parsed).toEqual({
      ok: true,
      event: {
        type: 'composio.connected_account.expired',
        id: delivery?.webhookId,
        timestamp: expect.any(String),
        connectedAccountId: accountId,
        userId: null,
        toolkit: 'slack',
      },
    });
    const raw = JSON.parse(receiver.received.at(-1)?.body.toString() ?? '{}');
    expect(raw.metadata).toEqual({ project_id: expect.stringMatching(/^pr_/), org_id: expect.stringMatching(/^ok_/) });
    expect(raw.data).toMatchObject({ id: accountId, status: 'EXPIRED', toolkit: { slug: 'slack' } });
    expect(raw.data).not.toHaveProperty('user_id');
  });

  it('reads an expired account without user_id, as Composio documents the event (user_id is deprecated)', () => {
    const documented = {
      id: 'msg_1',
      timestamp: 't',
      type: 'composio.connected_account.expired',
      metadata: { project_id: 'pr_1', org_id: 'ok_1' },
      data: { id: 'ca_1', status: 'EXPIRED', toolkit: { slug: 'gmail' } },
    };
    expect(parseWebhookEvent(JSON.stringify(documented))).toEqual({
      ok: true,
      event: {
        type: 'composio.connected_account.expired',
        id: 'msg_1',
        timestamp: 't',
        connectedAccountId: 'ca_1',
        userId: null,
        toolkit: 'gmail',
      },
    });
  });

  it('passes other composio events through as other', () => {
    expect(
      parseWebhookEvent(JSON.stringify({ id: 'msg_1', timestamp: 't', type: 'composio.something.new', metadata: {}, data: {} })),
    ).toEqual({
      ok: true,
      event: { type: 'other', id: 'msg_1', timestamp: 't', eventType: 'composio.something.new' },
    });
  });

  it('refuses what is not a V3 event', () => {
    expect(parseWebhookEvent('not json')).toEqual({ ok: false, reason: 'invalid_json' });
    expect(parseWebhookEvent('[]')).toEqual({ ok: false, reason: 'invalid_payload' });
    expect(parseWebhookEvent(JSON.stringify({ trigger_name: 'X', payload: {} }))).toEqual({ ok: false, reason: 'invalid_payload' });
    const missingTrigger = {
      id: 'm',
      timestamp: 't',
      type: 'composio.trigger.message',
      metadata: { trigger_slug: 'S', connected_account_id: 'ca', user_id: 'u' },
      data: {},
    };
    expect(parseWebhookEvent(JSON.stringify(missingTrigger))).toEqual({ ok: false, reason: 'invalid_payload' });
    const expiredWithoutAccount = { id: 'm', timestamp: 't', type: 'composio.connected_account.expired', metadata: {}, data: {} };
    expect(parseWebhookEvent(JSON.stringify(expiredWithoutAccount))).toEqual({ ok: false, reason: 'invalid_payload' });
  });
});
