import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { utcDay } from '../../src/clock.js';
import { freePort } from '../../src/db/embedded.js';
import { composioUserIdFor } from '../../src/installations/tokens.js';
import { createLogger } from '../../src/logger.js';
import { reattachReconnectedTriggers } from '../../src/triggers/reconnect-job.js';
import { type Harness, startHarness } from '../composio/harness.js';
import { buildTestApp, register, type TestApp } from '../support/app.js';
import { until } from '../support/http.js';

/**
 * A trigger whose account expired comes back on the account the person reconnects under the
 * same label, with no client call: the real SDK against the simulator, which delivers its
 * signed webhooks (expiry, trigger messages) to the broker over loopback, and the consent page
 * answered over HTTP as a browser would.
 */

let h: Harness;
let t: TestApp;
const log = createLogger('silent');
const job = () => reattachReconnectedTriggers({ db: t.database.db, sql: t.database.sql, composio: h.gateway, log }, { now: new Date() });

beforeAll(async () => {
  h = await startHarness();
  const port = await freePort();
  const subscription = await fetch(`${h.sim.origin}/api/v3.1/webhook_subscriptions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': h.sim.apiKey },
    body: JSON.stringify({
      webhook_url: `http://127.0.0.1:${port}/v1/webhooks/composio`,
      enabled_events: ['composio.trigger.message', 'composio.connected_account.expired'],
      version: 'V3',
    }),
  });
  const { secret } = (await subscription.json()) as { secret: string };
  t = await buildTestApp(
    { COMPOSIO_WEBHOOK_SECRET: secret, REGISTRATIONS_PER_MINUTE: '1000', CONNECTOR_REQUESTS_PER_MINUTE: '1000' },
    { composio: h.gateway },
  );
  await t.app.listen({ port, host: '127.0.0.1' });
});
afterAll(async () => {
  await t?.close();
  await h?.close();
});

type Auth = { authorization: string };

async function call(auth: Auth, method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: unknown) {
  const response = await t.app.inject({ method, url, headers: auth, ...(payload === undefined ? {} : { payload: payload as object }) });
  return { status: response.statusCode, json: response.body ? response.json() : undefined };
}

/** The person asks for a sign-in link under `alias` (or none) and presses Authorize on the consent page. */
async function connect(auth: Auth, toolkit: string, alias?: string): Promise<string> {
  const link = await call(auth, 'POST', `/v1/connectors/${toolkit}/authorize`, alias === undefined ? {} : { alias });
  expect(link.status).toBe(200);
  const page = await fetch(link.json.url);
  expect(page.status).toBe(200);
  const consent = await fetch(`${link.json.url}/authorize`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: '',
    redirect: 'manual',
  });
  expect(consent.status).toBeLessThan(400);
  return link.json.connectedAccountId as string;
}

async function newTrigger(auth: Auth, accountId: string, body: Record<string, unknown>) {
  const created = await call(auth, 'POST', '/v1/triggers', {
    toolkit: 'gmail',
    triggerSlug: 'GMAIL_NEW_GMAIL_MESSAGE',
    connectedAccountId: accountId,
    ...body,
  });
  expect(created.status).toBe(201);
  return created.json;
}

const composioTriggerOf = async (id: string) =>
  (await t.database.sql<{ composio_trigger_id: string }[]>`select composio_trigger_id from triggers where id = ${id}`)[0]!
    .composio_trigger_id;
const simTrigger = (composioTriggerId: string) => h.sim.controls.state().triggers.find((tr) => tr.id === composioTriggerId);

describe('after a reconnect under the same label', () => {
  it('brings every trigger of the replaced account back on the new one, and the next event arrives', async () => {
    const { installationId, auth } = await register(t.app);
    const work = await connect(auth, 'gmail', 'work');
    const home = await connect(auth, 'gmail', 'home');
    const mail = await newTrigger(auth, work, {
      automationId: 'auto_mail',
      filter: { from: 'boss@example.com' },
      config: { interval: 30 },
    });
    const paused = await newTrigger(auth, work, { automationId: 'auto_paused', filter: { subject: 'invoice' }, enabled: false });
    const stranded = await newTrigger(auth, home, { automationId: 'auto_home' });
    const day = utcDay(new Date());
    await t.database.sql`
      insert into trigger_daily_usage (trigger_id, day, kept, skipped, skipped_reason)
      values (${mail.id}, ${day}, 3, 1, 'filtered')`;
    const oldComposioTrigger = await composioTriggerOf(mail.id);

    // Both sign-ins lapse: Composio says so with a signed webhook.
    for (const account of [work, home]) expect((await h.sim.controls.expireAccount(account)).delivery?.status).toBe(200);
    for (const trigger of [mail, paused, stranded]) {
      expect((await call(auth, 'GET', `/v1/triggers/${trigger.id}`)).json.status).toBe('needs_reconnect');
    }
    // Nothing to come back to yet.
    expect(await job()).toEqual({ ran: true, moved: 0 });

    // The person reconnects "work" (the stopped account is deleted, a new one linked under its label).
    const reconnected = await connect(auth, 'gmail', 'work');
    expect(reconnected).not.toBe(work);
    expect(await job()).toEqual({ ran: true, moved: 2 });

    const back = await call(auth, 'GET', `/v1/triggers/${mail.id}`);
    expect(back.json).toEqual({
      ...mail,
      connectedAccountId: reconnected,
      status: 'active',
      today: { kept: 3, skipped: 1, skippedReason: 'filtered' },
    });
    const stillPaused = await call(auth, 'GET', `/v1/triggers/${paused.id}`);
    expect(stillPaused.json).toEqual({ ...paused, connectedAccountId: reconnected, status: 'paused' });
    expect((await call(auth, 'GET', `/v1/triggers/${stranded.id}`)).json).toMatchObject({
      connectedAccountId: home,
      status: 'needs_reconnect',
    });

    // Made anew on Composio on the new account, with the same filter; the old one is gone.
    const newComposioTrigger = await composioTriggerOf(mail.id);
    expect(newComposioTrigger).not.toBe(oldComposioTrigger);
    expect(simTrigger(oldComposioTrigger)).toBeUndefined();
    expect(simTrigger(newComposioTrigger)).toMatchObject({
      connected_account_id: reconnected,
      user_id: composioUserIdFor(installationId),
      disabled_at: null,
      trigger_config: expect.objectContaining({ query: expect.stringContaining('boss@example.com'), interval: 30 }),
    });
    expect(simTrigger(await composioTriggerOf(paused.id))).toMatchObject({
      connected_account_id: reconnected,
      disabled_at: expect.any(String),
    });

    // The next event is delivered to the queue, under the same trigger id.
    const fired = await h.sim.controls.fireTrigger(newComposioTrigger, { from: 'boss@example.com', subject: 'back' });
    expect(fired.status).toBe(200);
    const polled = await call(auth, 'GET', '/v1/events?wait=0');
    const event = polled.json.events.find((e: { type: string }) => e.type !== 'connection.expired');
    expect(event).toMatchObject({ triggerId: mail.id, automationId: 'auto_mail', connectedAccountId: reconnected });

    // A second run has nothing left to do.
    expect(await job()).toEqual({ ran: true, moved: 0 });
  });

  it('watches a trigger stranded for days closely again once a sign-in link under its label is asked for', async () => {
    const { auth } = await register(t.app);
    const work = await connect(auth, 'gmail', 'Work');
    const trigger = await newTrigger(auth, work, { automationId: 'auto_old' });
    await h.sim.controls.expireAccount(work);
    await t.database.sql`update triggers set needs_reconnect_at = now() - interval '3 days' where id = ${trigger.id}`;
    const frequentRun = () =>
      reattachReconnectedTriggers(
        { db: t.database.db, sql: t.database.sql, composio: h.gateway, log },
        { now: new Date(), includeOld: false },
      );

    // Reconnected days later; the label is compared without regard to case.
    const reconnected = await connect(auth, 'gmail', 'work');
    const [row] = await t.database.sql<
      { reconnect_asked_at: Date | null }[]
    >`select reconnect_asked_at from triggers where id = ${trigger.id}`;
    expect(row!.reconnect_asked_at).not.toBeNull();
    expect(await frequentRun()).toEqual({ ran: true, moved: 1 });
    expect((await call(auth, 'GET', `/v1/triggers/${trigger.id}`)).json).toMatchObject({
      connectedAccountId: reconnected,
      status: 'active',
    });
  });

  it('brings back a trigger whose account had no label, on the app’s one working account without one', async () => {
    const { auth } = await register(t.app);
    // A first connection has no label.
    const first = await connect(auth, 'gmail');
    const mail = await newTrigger(auth, first, { automationId: 'auto_unlabelled', filter: { from: 'boss@example.com' } });
    expect((await h.sim.controls.expireAccount(first)).delivery?.status).toBe(200);
    expect((await call(auth, 'GET', `/v1/triggers/${mail.id}`)).json.status).toBe('needs_reconnect');

    // Reconnect as the app does it: the stopped account is removed, then a sign-in with no label.
    expect((await call(auth, 'DELETE', `/v1/connectors/gmail/accounts/${first}`)).status).toBe(200);
    const again = await connect(auth, 'gmail');
    expect(await job()).toEqual({ ran: true, moved: 1 });
    expect((await call(auth, 'GET', `/v1/triggers/${mail.id}`)).json).toMatchObject({ connectedAccountId: again, status: 'active' });

    // Stopped again; this time the retry happens beside the stopped account (an `omb-retry-` label).
    expect((await h.sim.controls.expireAccount(again)).delivery?.status).toBe(200);
    const retry = await connect(auth, 'gmail');
    expect(await job()).toEqual({ ran: true, moved: 1 });
    expect((await call(auth, 'GET', `/v1/triggers/${mail.id}`)).json).toMatchObject({ connectedAccountId: retry, status: 'active' });
  });

  it('runs in one process at a time', async () => {
    const other = await t.database.sql.reserve();
    try {
      await other`select pg_advisory_lock(7262011004)`;
      expect(await job()).toEqual({ ran: false, moved: 0 });
      await other`select pg_advisory_unlock(7262011004)`;
      expect((await job()).ran).toBe(true);
    } finally {
      other.release();
    }
  });
});

describe('PATCH /v1/triggers/{id} with connectedAccountId', () => {
  it('moves the trigger to another ACTIVE account of the installation, checked like create', async () => {
    const { auth } = await register(t.app);
    const work = await connect(auth, 'gmail', 'work');
    const trigger = await newTrigger(auth, work, { automationId: 'auto_move', filter: { from: 'a@example.com' } });
    await h.sim.controls.expireAccount(work);
    await until(async () => (await call(auth, 'GET', `/v1/triggers/${trigger.id}`)).json.status === 'needs_reconnect');

    const stranger = await register(t.app);
    const foreign = await connect(stranger.auth, 'gmail', 'work');
    const slack = await connect(auth, 'slack', 'team');
    const pending = (await call(auth, 'POST', '/v1/connectors/gmail/authorize', { alias: 'later' })).json.connectedAccountId;

    const refusedForeign = await call(auth, 'PATCH', `/v1/triggers/${trigger.id}`, { connectedAccountId: foreign });
    expect(refusedForeign).toEqual({ status: 404, json: { error: expect.any(String), code: 'connected_account_not_found' } });
    const refusedUnknown = await call(auth, 'PATCH', `/v1/triggers/${trigger.id}`, { connectedAccountId: 'ca_nope' });
    expect(refusedUnknown.json.code).toBe('connected_account_not_found');
    const refusedApp = await call(auth, 'PATCH', `/v1/triggers/${trigger.id}`, { connectedAccountId: slack });
    expect(refusedApp).toEqual({ status: 400, json: { error: expect.any(String), code: 'toolkit_mismatch' } });
    const refusedPending = await call(auth, 'PATCH', `/v1/triggers/${trigger.id}`, { connectedAccountId: pending });
    expect(refusedPending).toEqual({ status: 409, json: { error: expect.any(String), code: 'reconnect_required' } });
    const refusedEmpty = await call(auth, 'PATCH', `/v1/triggers/${trigger.id}`, {});
    expect(refusedEmpty.status).toBe(400);
    // Another installation cannot move this trigger, even to its own account.
    expect((await call(stranger.auth, 'PATCH', `/v1/triggers/${trigger.id}`, { connectedAccountId: foreign })).status).toBe(404);
    expect((await call(auth, 'GET', `/v1/triggers/${trigger.id}`)).json).toMatchObject({
      connectedAccountId: work,
      status: 'needs_reconnect',
    });

    const office = await connect(auth, 'gmail', 'office');
    const moved = await call(auth, 'PATCH', `/v1/triggers/${trigger.id}`, { connectedAccountId: office });
    expect(moved).toEqual({ status: 200, json: { ...trigger, connectedAccountId: office, status: 'active' } });
    expect(simTrigger(await composioTriggerOf(trigger.id))).toMatchObject({ connected_account_id: office, disabled_at: null });

    // Moved and paused in one request.
    const again = await call(auth, 'PATCH', `/v1/triggers/${trigger.id}`, { connectedAccountId: office, enabled: false });
    expect(again.json).toMatchObject({ connectedAccountId: office, enabled: false, status: 'paused' });
  });
});
