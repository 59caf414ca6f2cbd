import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { disableInstallation, enableInstallation } from '../../src/installations/disable.js';
import { register } from '../support/app.js';
import { buildEventsApp, drain, type EventsTestApp, getEvents, insertTrigger, send } from './helpers.js';

/**
 * Webhooks for an installation an operator disabled (docs/events.md, "Disabled installations"):
 * a disable is a suspension the operator can lift, so ingest treats the installation as any
 * other — its events are kept, within its day's quota, and wait in its queue for the enable.
 */

let t: EventsTestApp;
beforeAll(async () => {
  t = await buildEventsApp({ QUOTA_STANDARD: '3', QUOTA_PAID: '5' });
});
afterAll(() => t.close());

const disable = (installationId: string) => t.database.db.transaction((tx) => disableInstallation(tx, installationId, t.clock.now()));

describe('webhooks while an operator has disabled the installation', () => {
  it('are kept and counted like any others, the quota still bounds them, and they are delivered once it is enabled', async () => {
    t.clock.set('2031-05-06T10:00:00.000Z');
    const owner = await register(t.app);
    const trigger = await insertTrigger(t.database, owner.installationId);
    await disable(owner.installationId);
    expect((await getEvents(t, owner.auth)).statusCode).toBe(403);

    // Two at once (written together in one batch), then one at a time up to the quota and past it.
    const together = await Promise.all([send(t, trigger, { data: { n: 1 } }), send(t, trigger, { data: { n: 2 } })]);
    expect(together.map((s) => s.outcome)).toEqual(['accepted', 'accepted']);
    expect((await send(t, trigger, { data: { n: 3 } })).outcome).toBe('accepted');
    expect((await send(t, trigger, { data: { n: 4 } })).outcome).toBe('over_quota');

    await enableInstallation(t.database.db, owner.installationId);
    const events = await drain(t, owner.auth);
    expect(events.map((e) => e.type)).toEqual(['trigger.event', 'trigger.event', 'trigger.event', 'quota.exceeded']);
    expect(events.slice(0, 3).map((e) => e.data.n)).toEqual(expect.arrayContaining([1, 2, 3]));
    const me = await t.app.inject({ method: 'GET', url: '/v1/me', headers: owner.auth });
    expect(me.json().quota).toMatchObject({ eventsPerDay: 3, keptToday: 3, skippedToday: 1 });
  });
});
