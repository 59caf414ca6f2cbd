import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { register } from '../support/app.js';
import { buildEventsApp, drain, type EventsTestApp, insertTrigger, post, send, signed, triggerMessage } from './helpers.js';

let t: EventsTestApp;
beforeAll(async () => {
  t = await buildEventsApp({ QUOTA_STANDARD: '3', QUOTA_PAID: '5' });
});
afterAll(() => t.close());

async function usage(installationId: string, day: string) {
  const [row] = await t.database.sql`
    select kept, skipped, exceeded_notified from daily_usage where installation_id = ${installationId} and day = ${day}`;
  return row;
}

async function triggerToday(triggerId: string, day: string) {
  const [row] = await t.database.sql`
    select kept, skipped, skipped_reason from trigger_daily_usage where trigger_id = ${triggerId} and day = ${day}`;
  return row;
}

describe('the daily quota', () => {
  it('keeps the standard plan’s events up to the limit, then skips them and says so once', async () => {
    t.clock.set('2031-03-14T12:00:00.000Z');
    const owner = await register(t.app);
    const first = await insertTrigger(t.database, owner.installationId);
    const second = await insertTrigger(t.database, owner.installationId);

    for (const trigger of [first, first, second]) expect((await send(t, trigger)).outcome).toBe('accepted');
    for (const trigger of [first, second, second]) expect((await send(t, trigger)).outcome).toBe('over_quota');

    const events = await drain(t, owner.auth);
    expect(events.map((e) => e.type)).toEqual(['trigger.event', 'trigger.event', 'trigger.event', 'quota.exceeded']);
    expect(events[3]).toMatchObject({
      triggerId: null,
      data: { day: '2031-03-14', eventsPerDay: 3, resetsAt: '2031-03-15T00:00:00.000Z' },
    });
    // quota.exceeded is not a kept event.
    expect(await usage(owner.installationId, '2031-03-14')).toEqual({ kept: 3, skipped: 3, exceeded_notified: true });
    expect(await triggerToday(first.id, '2031-03-14')).toEqual({ kept: 2, skipped: 1, skipped_reason: 'daily_limit' });
    expect(await triggerToday(second.id, '2031-03-14')).toEqual({ kept: 1, skipped: 2, skipped_reason: 'daily_limit' });

    const me = await t.app.inject({ method: 'GET', url: '/v1/me', headers: owner.auth });
    expect(me.json().quota).toMatchObject({ eventsPerDay: 3, keptToday: 3, skippedToday: 3 });
  });

  it('starts again at UTC midnight, with a new quota.exceeded for the new day', async () => {
    t.clock.set('2031-04-01T23:59:58.000Z');
    const owner = await register(t.app);
    const trigger = await insertTrigger(t.database, owner.installationId);
    for (let i = 0; i < 3; i++) expect((await send(t, trigger)).outcome).toBe('accepted');
    expect((await send(t, trigger)).outcome).toBe('over_quota');

    t.clock.set('2031-04-01T23:59:59.999Z');
    expect((await send(t, trigger)).outcome).toBe('over_quota');
    t.clock.set('2031-04-02T00:00:00.000Z');
    for (let i = 0; i < 3; i++) expect((await send(t, trigger)).outcome).toBe('accepted');
    expect((await send(t, trigger)).outcome).toBe('over_quota');
    expect((await send(t, trigger)).outcome).toBe('over_quota');

    const events = await drain(t, owner.auth);
    expect(events.map((e) => e.type)).toEqual([
      ...Array(3).fill('trigger.event'),
      'quota.exceeded',
      ...Array(3).fill('trigger.event'),
      'quota.exceeded',
    ]);
    expect(events[3]!.data.day).toBe('2031-04-01');
    expect(events[7]!.data.day).toBe('2031-04-02');
    expect(await usage(owner.installationId, '2031-04-01')).toEqual({ kept: 3, skipped: 2, exceeded_notified: true });
    expect(await usage(owner.installationId, '2031-04-02')).toEqual({ kept: 3, skipped: 2, exceeded_notified: true });
  });

  it('follows the plan: an installation holding a valid grant keeps the paid number', async () => {
    t.clock.set('2031-05-01T08:00:00.000Z');
    const owner = await register(t.app);
    await t.database.sql`
      insert into grants (jti, subject, plan, holder_installation_id, issued_at, expires_at)
      values (${randomUUID()}, 'cloud-1', 'paid', ${owner.installationId}, '2031-04-01T00:00:00Z', '2031-06-01T00:00:00Z')`;
    const trigger = await insertTrigger(t.database, owner.installationId);
    const outcomes = [];
    for (let i = 0; i < 6; i++) outcomes.push((await send(t, trigger)).outcome);
    expect(outcomes).toEqual(['accepted', 'accepted', 'accepted', 'accepted', 'accepted', 'over_quota']);
    expect((await drain(t, owner.auth)).at(-1)).toMatchObject({ type: 'quota.exceeded', data: { eventsPerDay: 5 } });
  });

  it('does not count filtered events or redeliveries', async () => {
    t.clock.set('2031-06-01T08:00:00.000Z');
    const owner = await register(t.app);
    const trigger = await insertTrigger(t.database, owner.installationId, { filter: { title: 'urgent' } });
    for (let i = 0; i < 5; i++) expect((await send(t, trigger, { data: { title: 'routine' } })).outcome).toBe('filtered');
    const webhook = signed(triggerMessage(trigger, { title: 'URGENT' }), { at: t.clock.now() });
    for (let i = 0; i < 4; i++) await post(t, webhook);
    expect(await usage(owner.installationId, '2031-06-01')).toEqual({ kept: 1, skipped: 0, exceeded_notified: false });
    expect((await send(t, trigger, { data: { title: 'urgent 2' } })).outcome).toBe('accepted');
    expect((await send(t, trigger, { data: { title: 'urgent 3' } })).outcome).toBe('accepted');
    expect((await send(t, trigger, { data: { title: 'urgent 4' } })).outcome).toBe('over_quota');
  });

  it('is counted per installation: one installation over its limit does not affect another', async () => {
    t.clock.set('2031-07-01T08:00:00.000Z');
    const a = await register(t.app);
    const b = await register(t.app);
    const ta = await insertTrigger(t.database, a.installationId);
    const tb = await insertTrigger(t.database, b.installationId);
    for (let i = 0; i < 4; i++) await send(t, ta);
    expect((await send(t, tb)).outcome).toBe('accepted');
    expect((await drain(t, b.auth)).map((e) => e.type)).toEqual(['trigger.event']);
  });
});
