import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { register } from '../../support/app.js';
import { buildEventsApp, drain, type EventsTestApp, insertTrigger, post, send, signed, triggerMessage } from '../helpers.js';

/** Dedupe within an installation, over a stated window, and broker-made ids apart from webhook ids. */
let t: EventsTestApp;
beforeAll(async () => {
  t = await buildEventsApp({ QUOTA_STANDARD: '3' });
});
afterAll(() => t.close());

describe('dedupe', () => {
  it('is scoped by installation: the same webhook-id for two installations is stored for each', async () => {
    t.clock.set('2033-05-01T10:00:00.000Z');
    const a = await register(t.app);
    const b = await register(t.app);
    const ta = await insertTrigger(t.database, a.installationId);
    const tb = await insertTrigger(t.database, b.installationId);
    const id = 'msg_shared_between_two_installations';
    expect((await send(t, ta, { id })).outcome).toBe('accepted');
    expect((await send(t, tb, { id })).outcome).toBe('accepted');
    expect((await send(t, ta, { id })).outcome).toBe('duplicate');
    expect((await drain(t, a.auth)).map((e) => e.id)).toEqual([id]);
    expect((await drain(t, b.auth)).map((e) => e.id)).toEqual([id]);
  });

  it('recognises a redelivery within 72 hours, across days', async () => {
    t.clock.set('2033-05-10T23:59:00.000Z');
    const owner = await register(t.app);
    const trigger = await insertTrigger(t.database, owner.installationId);
    const first = await send(t, trigger);
    t.clock.set('2033-05-13T23:58:00.000Z');
    expect((await send(t, trigger, { id: first.id })).outcome).toBe('duplicate');
    // Past the window a delivery with that id is new (Composio stops retrying within about a day).
    t.clock.set('2033-05-14T00:00:00.000Z');
    expect((await send(t, trigger, { id: first.id })).outcome).toBe('accepted');
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
    expect((await send(t, trigger, { id: lookalike })).outcome).toBe('accepted');
    expect((await send(t, trigger)).outcome).toBe('accepted');
    expect((await send(t, trigger)).outcome).toBe('accepted');
    expect((await send(t, trigger)).outcome).toBe('over_quota');
    const events = await drain(t, owner.auth);
    expect(events.map((e) => e.type)).toEqual(['trigger.event', 'trigger.event', 'trigger.event', 'quota.exceeded']);
    expect(events[0]!.id).toBe(lookalike);
    expect(events[3]!.id).toBe('omb:quota.exceeded:2033-06-01');
  });

  it('are refused as a webhook-id', async () => {
    const owner = await register(t.app);
    const trigger = await insertTrigger(t.database, owner.installationId);
    const response = await post(t, signed(triggerMessage(trigger), { at: t.clock.now(), id: 'omb:quota.exceeded:2033-06-01' }));
    expect(response.statusCode).toBe(400);
    expect(response.json()).toMatchObject({ code: expect.any(String), error: expect.any(String) });
    expect(await drain(t, owner.auth)).toEqual([]);
  });
});
