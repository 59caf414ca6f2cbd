import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { composioUserIdFor } from '../../src/installations/tokens.js';
import { register } from '../support/app.js';
import { accountExpired, buildEventsApp, type EventsTestApp, insertTrigger, poll, post, SECRET, signed } from './helpers.js';

/**
 * An expiry reaches only the installation that owns the account, as the broker stored it (the
 * triggers on that account id), whatever `user_id` the event names, and works without one.
 */

let t: EventsTestApp;
beforeAll(async () => {
  t = await buildEventsApp();
});
afterAll(() => t.close());

/** Two installations, each with a trigger on an account of its own. */
async function twoInstallations() {
  const a = await register(t.app);
  const b = await register(t.app);
  const aTrigger = await insertTrigger(t.database, a.installationId, { connectedAccountId: `ca_a_${a.installationId.slice(0, 8)}` });
  const bTrigger = await insertTrigger(t.database, b.installationId, { connectedAccountId: `ca_b_${b.installationId.slice(0, 8)}` });
  return { a, b, aTrigger, bTrigger };
}

const needsReconnect = async (triggerId: string) => {
  const [row] = await t.database.sql<
    { needs_reconnect_at: Date | null }[]
  >`select needs_reconnect_at from triggers where id = ${triggerId}`;
  return row!.needs_reconnect_at !== null;
};

describe('an expired account', () => {
  it('naming A’s user but B’s account queues nothing to A: it is B’s event, routed by the stored owner', async () => {
    const { a, b, aTrigger, bTrigger } = await twoInstallations();
    const webhook = signed(accountExpired(composioUserIdFor(a.installationId), bTrigger.connectedAccountId), { at: t.clock.now() });
    expect((await post(t, webhook)).json()).toEqual({ outcome: 'accepted' });

    expect((await poll(t, a.auth, { wait: 0 })).events).toEqual([]);
    expect(await needsReconnect(aTrigger.id)).toBe(false);
    const { events } = await poll(t, b.auth, { wait: 0 });
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({
      id: webhook.id,
      type: 'connection.expired',
      connectedAccountId: bTrigger.connectedAccountId,
      data: { connectedAccountId: bTrigger.connectedAccountId, triggers: [{ triggerId: bTrigger.id }] },
    });
    expect(await needsReconnect(bTrigger.id)).toBe(true);
  });

  it('without user_id (as Composio documents the event) reaches the account’s owner', async () => {
    const { a, b, bTrigger } = await twoInstallations();
    const payload = accountExpired('unused', bTrigger.connectedAccountId);
    const { user_id: _dropped, ...data } = payload.data;
    const webhook = signed({ ...payload, data }, { at: t.clock.now() });
    expect((await post(t, webhook)).json()).toEqual({ outcome: 'accepted' });
    expect((await poll(t, b.auth, { wait: 0 })).events).toMatchObject([
      { id: webhook.id, type: 'connection.expired', connectedAccountId: bTrigger.connectedAccountId },
    ]);
    expect((await poll(t, a.auth, { wait: 0 })).events).toEqual([]);
  });

  it('of an account no installation stored is answered 200 and ignored, even naming an installation’s user', async () => {
    const { a, aTrigger } = await twoInstallations();
    const webhook = signed(accountExpired(composioUserIdFor(a.installationId), 'ca_nobody_stored'), { at: t.clock.now() });
    const response = await post(t, webhook);
    expect(response.statusCode).toBe(200);
    expect(response.json()).toEqual({ outcome: 'unknown_account' });
    expect((await poll(t, a.auth, { wait: 0 })).events).toEqual([]);
    expect(await needsReconnect(aTrigger.id)).toBe(false);
    // Counted and logged as such, never with the signing secret.
    expect(t.events.outcomes.totals().unknown_account).toBeGreaterThanOrEqual(1);
    const line = t.logs.lines.find((l) => l.includes(webhook.id));
    expect(line).toContain('unknown_account');
    expect(t.logs.text).not.toContain(SECRET);
  });

  it('is answered by the database function with the stored owner and what it queued', async () => {
    const { a, b, bTrigger } = await twoInstallations();
    const [row] = await t.database.sql<{ outcome: string; installation: string | null; queued: string | null }[]>`
      select * from omb_ingest_account_expiry('msg_direct_expiry', ${bTrigger.connectedAccountId}, 'github', now())`;
    expect(row).toEqual({ outcome: 'accepted', installation: b.installationId, queued: 'connection.expired' });
    expect((await poll(t, a.auth, { wait: 0 })).events).toEqual([]);
    expect((await poll(t, b.auth, { wait: 0 })).events).toMatchObject([{ id: 'msg_direct_expiry', type: 'connection.expired' }]);
  });
});
