import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { register } from '../support/app.js';
import {
  buildEventsApp,
  type EventsTestApp,
  insertTrigger,
  type SignedWebhook,
  signed,
  type TestTrigger,
  triggerMessage,
} from './helpers.js';

/** Dedupe within an installation, over a stated window, and broker-made ids apart from webhook ids. */
let t: EventsTestApp;
beforeAll(async () => {
  t = await buildEventsApp({ QUOTA_STANDARD: '3' });
});
afterAll(() => t.close());

async function post(webhook: SignedWebhook) {
  return t.app.inject({ method: 'POST', url: '/v1/webhooks/composio', headers: webhook.headers, payload: webhook.body });
}

async function send(trigger: TestTrigger, options: { id?: string } = {}): Promise<{ id: string; outcome: string }> {
  const webhook = signed(triggerMessage(trigger), { at: t.clock.now(), ...(options.id ? { id: options.id } : {}) });
  const response = await post(webhook);
  expect(response.statusCode).toBe(200);
  return { id: webhook.id, outcome: response.json<{ outcome: string }>().outcome };
}

async function drain(auth: { authorization: string }) {
  const response = await t.app.inject({ method: 'GET', url: '/v1/events?wait=0&limit=100', headers: auth });
  expect(response.statusCode).toBe(200);
  return response.json<{ events: Array<{ id: string; type: string }> }>().events;
}

describe('dedupe', () => {
  it('is scoped by installation: the same webhook-id for two installations is stored for each', async () => {
    t.clock.set('2033-05-01T10:00:00.000Z');
    const a = await register(t.app);
    const b = await register(t.app);
    const ta = await insertTrigger(t.database, a.installationId);
    const tb = await insertTrigger(t.database, b.installationId);
    const id = 'msg_shared_between_two_installations';
    expect((await send(ta, { id })).outcome).toBe('accepted');
    expect((await send(tb, { id })).outcome).toBe('accepted');
    expect((await send(ta, { id })).outcome).toBe('duplicate');
    expect((await drain(a.auth)).map((e) => e.id)).toEqual([id]);
    expect((await drain(b.auth)).map((e) => e.id)).toEqual([id]);
  });

  it('recognises a redelivery within 72 hours, across days', async () => {
    t.clock.set('2033-05-10T23:59:00.000Z');
    const owner = await register(t.app);
    const trigger = await insertTrigger(t.database, owner.installationId);
    const first = await send(trigger);
    t.clock.set('2033-05-13T23:58:00.000Z');
    expect((await send(trigger, { id: first.id })).outcome).toBe('duplicate');
    // Past the window a delivery with that id is new (Composio stops retrying within about a day).
    t.clock.set('2033-05-14T00:00:00.000Z');
    expect((await send(trigger, { id: first.id })).outcome).toBe('accepted');
  });
});

describe('broker-made event ids', () => {
  it('never meet a webhook id: the old quota.exceeded id as a webhook-id is an ordinary event', async () => {
    t.clock.set('2033-06-01T10:00:00.000Z');
    const owner = await register(t.app);
    const trigger = await insertTrigger(t.database, owner.installationId);
    // Today's main made `quota.exceeded:<installation>:<day>`; a webhook carrying that id took
    // its place in the dedupe space.
    const lookalike = `quota.exceeded:${owner.installationId}:2033-06-01`;
    expect((await send(trigger, { id: lookalike })).outcome).toBe('accepted');
    expect((await send(trigger)).outcome).toBe('accepted');
    expect((await send(trigger)).outcome).toBe('accepted');
    expect((await send(trigger)).outcome).toBe('over_quota');
    const events = await drain(owner.auth);
    expect(events.map((e) => e.type)).toEqual(['trigger.event', 'trigger.event', 'trigger.event', 'quota.exceeded']);
    expect(events[0]!.id).toBe(lookalike);
    expect(events[3]!.id).toBe('omb:quota.exceeded:2033-06-01');
  });

  it('are refused as a webhook-id', async () => {
    const owner = await register(t.app);
    const trigger = await insertTrigger(t.database, owner.installationId);
    const response = await post(signed(triggerMessage(trigger), { at: t.clock.now(), id: 'omb:quota.exceeded:2033-06-01' }));
    expect(response.statusCode).toBe(400);
    expect(response.json()).toMatchObject({ code: expect.any(String), error: expect.any(String) });
    expect(await drain(owner.auth)).toEqual([]);
  });
});
