import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ComposioGateway } from '../../src/composio/index.js';
import { freePort } from '../../src/db/embedded.js';
import type { Simulator } from '../../src/sim/index.js';
import { connectAccount, startHarness } from '../composio/harness.js';
import { buildTestApp, register, type TestApp } from '../support/app.js';
import { until } from '../support/http.js';

/**
 * Real Composio is strict where the simulator used to be kind, and the broker works with it:
 * a switch to the state a trigger already has is `409` there, a delete of one already gone `409`
 * or `410`; Composio stops triggers by itself and says so with `composio.trigger.disabled`; it
 * redelivers what was not answered `2xx`; and Gmail leaves out the mail a trigger's query
 * excludes. The real SDK against the simulator, which delivers its signed webhooks to the broker
 * over loopback.
 */

const EVENTS = ['composio.trigger.message', 'composio.connected_account.expired', 'composio.trigger.disabled'];

interface World {
  sim: Simulator;
  gateway: ComposioGateway;
  t: TestApp;
  close(): Promise<void>;
}

/** A simulator subscribed to `events` at the broker (or at `via`, a stand-in in front of it), and the broker. */
async function startWorld(
  options: { readings?: { deletedTrigger: 409 | 410 }; events?: string[]; via?: (brokerUrl: string) => Promise<string> } = {},
): Promise<World> {
  const { sim, gateway } = await startHarness(
    {},
    { redeliveryDelaysMs: [50, 100, 200], ...(options.readings ? { readings: options.readings } : {}) },
  );
  const port = await freePort();
  const brokerUrl = `http://127.0.0.1:${port}/v1/webhooks/composio`;
  const webhookUrl = options.via ? await options.via(brokerUrl) : brokerUrl;
  const created = await fetch(`${sim.origin}/api/v3.1/webhook_subscriptions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': sim.apiKey },
    body: JSON.stringify({ webhook_url: webhookUrl, enabled_events: options.events ?? EVENTS, version: 'V3' }),
  });
  const { secret } = (await created.json()) as { secret: string };
  const t = await buildTestApp({ COMPOSIO_WEBHOOK_SECRET: secret, CONNECTOR_REQUESTS_PER_MINUTE: '1000' }, { composio: gateway });
  await t.app.listen({ port, host: '127.0.0.1' });
  return {
    sim,
    gateway,
    t,
    async close() {
      await t.close();
      await sim.close();
    },
  };
}

type Auth = { authorization: string };

async function call(w: World, auth: Auth, method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: unknown) {
  const response = await w.t.app.inject({ method, url, headers: auth, ...(payload === undefined ? {} : { payload: payload as object }) });
  return { status: response.statusCode, json: response.body ? response.json() : undefined };
}

/** A registered installation with an ACTIVE Gmail account, and a trigger on it. */
async function installationWithTrigger(w: World, body: Record<string, unknown> = {}) {
  const { installationId, auth } = await register(w.t.app);
  const [user] = await w.t.database.sql<{ composio_user_id: string }[]>`
    select composio_user_id from installations where id = ${installationId}`;
  const { accountId } = await connectAccount(
    { sim: w.sim, gateway: w.gateway, calls: [], close: async () => {} },
    user!.composio_user_id,
    'gmail',
    'work',
  );
  const created = await call(w, auth, 'POST', '/v1/triggers', {
    automationId: 'auto_mail',
    toolkit: 'gmail',
    triggerSlug: 'GMAIL_NEW_GMAIL_MESSAGE',
    connectedAccountId: accountId,
    ...body,
  });
  expect(created.status).toBe(201);
  const [row] = await w.t.database.sql<{ composio_trigger_id: string }[]>`
    select composio_trigger_id from triggers where id = ${created.json.id}`;
  return { installationId, auth, accountId, trigger: created.json, composioTriggerId: row!.composio_trigger_id };
}

/** What the simulator answered to the trigger-instance calls since `from`. */
const manageAnswers = (w: World, from: number) =>
  w.sim.controls
    .requests()
    .slice(from)
    .filter((r) => r.path.includes('/trigger_instances/manage/'))
    .map((r) => `${r.method} ${r.status}`);

/** Removes a trigger on Composio behind the broker's back (the dashboard, another tool). */
async function deleteOnComposio(w: World, composioTriggerId: string): Promise<void> {
  const response = await fetch(`${w.sim.origin}/api/v3.1/trigger_instances/manage/${composioTriggerId}`, {
    method: 'DELETE',
    headers: { 'x-api-key': w.sim.apiKey },
  });
  expect(response.status).toBe(200);
}

const poll = async (w: World, auth: Auth) => (await call(w, auth, 'GET', '/v1/events?wait=0')).json.events as Array<Record<string, any>>;

describe('redundant answers from Composio', () => {
  let w: World;
  beforeAll(async () => {
    w = await startWorld();
  });
  afterAll(() => w.close());

  it('pausing a paused trigger (and resuming a running one) is 200: Composio’s 409 "already" is done', async () => {
    const { auth, trigger } = await installationWithTrigger(w);
    const before = w.sim.controls.requests().length;
    for (const enabled of [true, false, false]) {
      const answer = await call(w, auth, 'PATCH', `/v1/triggers/${trigger.id}`, { enabled });
      expect(answer.status).toBe(200);
      expect(answer.json).toMatchObject({ enabled, status: enabled ? 'active' : 'paused' });
    }
    // The simulator answers as Composio does: already enabled, disabled, already disabled.
    expect(manageAnswers(w, before)).toEqual(['PATCH 409', 'PATCH 200', 'PATCH 409']);
  });

  it('deleting a trigger Composio already removed is 204 (Composio answers 409)', async () => {
    const { auth, trigger, composioTriggerId } = await installationWithTrigger(w);
    await deleteOnComposio(w, composioTriggerId);
    const before = w.sim.controls.requests().length;
    expect((await call(w, auth, 'DELETE', `/v1/triggers/${trigger.id}`)).status).toBe(204);
    expect(manageAnswers(w, before)).toEqual(['DELETE 409']);
    expect((await call(w, auth, 'GET', `/v1/triggers/${trigger.id}`)).status).toBe(404);
  });

  it('DELETE /v1/me completes when Composio already removed the triggers', async () => {
    const { auth, composioTriggerId } = await installationWithTrigger(w);
    const second = await call(w, auth, 'GET', '/v1/triggers');
    expect(second.json.triggers).toHaveLength(1);
    await deleteOnComposio(w, composioTriggerId);
    const before = w.sim.controls.requests().length;
    expect((await call(w, auth, 'DELETE', '/v1/me')).status).toBe(204);
    expect(manageAnswers(w, before)).toEqual(['DELETE 409']);
    expect((await call(w, auth, 'GET', '/v1/me')).status).toBe(401);
  });
});

describe('a simulator answering 410 for a trigger already gone (the other reading)', () => {
  let w: World;
  beforeAll(async () => {
    w = await startWorld({ readings: { deletedTrigger: 410 } });
  });
  afterAll(() => w.close());

  it('deletes and removes installations all the same', async () => {
    const one = await installationWithTrigger(w);
    await deleteOnComposio(w, one.composioTriggerId);
    let before = w.sim.controls.requests().length;
    expect((await call(w, one.auth, 'DELETE', `/v1/triggers/${one.trigger.id}`)).status).toBe(204);
    expect(manageAnswers(w, before)).toEqual(['DELETE 410']);
    const two = await installationWithTrigger(w);
    await deleteOnComposio(w, two.composioTriggerId);
    before = w.sim.controls.requests().length;
    expect((await call(w, two.auth, 'DELETE', '/v1/me')).status).toBe(204);
    expect(manageAnswers(w, before)).toEqual(['DELETE 410']);
  });
});

describe('composio.trigger.disabled', () => {
  let w: World;
  beforeAll(async () => {
    w = await startWorld();
  });
  afterAll(() => w.close());

  it('shows the stop with its reason and queues one trigger.disabled for the owner only', async () => {
    const owner = await installationWithTrigger(w);
    const other = await installationWithTrigger(w, { automationId: 'someone_else' });

    const stopped = await w.sim.controls.disableTrigger(owner.composioTriggerId, 'subscription_auth_failure');
    expect(stopped.delivery?.status).toBe(200);

    const shown = await call(w, owner.auth, 'GET', `/v1/triggers/${owner.trigger.id}`);
    expect(shown.json).toEqual({ ...owner.trigger, status: 'disabled_by_composio', statusReason: 'subscription_auth_failure' });
    const events = await poll(w, owner.auth);
    expect(events).toEqual([
      expect.objectContaining({
        id: stopped.delivery?.webhookId,
        type: 'trigger.disabled',
        triggerId: owner.trigger.id,
        automationId: 'auto_mail',
        toolkit: 'gmail',
        triggerSlug: 'GMAIL_NEW_GMAIL_MESSAGE',
        connectedAccountId: owner.accountId,
        data: { reason: 'subscription_auth_failure', status: 'disabled_by_composio' },
      }),
    ]);
    // Outside the quota; nothing reaches another installation.
    expect((await call(w, owner.auth, 'GET', '/v1/me')).json.quota.keptToday).toBe(0);
    expect(await poll(w, other.auth)).toEqual([]);
    expect((await call(w, other.auth, 'GET', `/v1/triggers/${other.trigger.id}`)).json.status).toBe('active');

    // Resuming asks Composio to run it again.
    const resumed = await call(w, owner.auth, 'PATCH', `/v1/triggers/${owner.trigger.id}`, { enabled: true });
    expect(resumed.json).toEqual({ ...owner.trigger, status: 'active' });
    expect(w.sim.controls.state().triggers.find((t) => t.id === owner.composioTriggerId)?.disabled_at).toBeNull();
  });

  it('after the account’s expiry already said so, stopping its triggers for connection_expired queues nothing more', async () => {
    const owner = await installationWithTrigger(w);
    const expired = await w.sim.controls.expireAccount(owner.accountId);
    expect(expired.delivery?.status).toBe(200);
    expect(expired.triggersDisabled).toEqual([{ triggerId: owner.composioTriggerId, delivery: expect.objectContaining({ status: 200 }) }]);
    expect(expired.triggersDisabled[0]?.delivery?.responseBody).toBe('{"outcome":"already_known"}');
    expect((await call(w, owner.auth, 'GET', `/v1/triggers/${owner.trigger.id}`)).json).toEqual({
      ...owner.trigger,
      status: 'needs_reconnect',
    });
    expect((await poll(w, owner.auth)).map((e) => e.type)).toEqual(['connection.expired']);
  });
});

describe('composio.trigger.disabled for connection_expired, without the account’s expiry', () => {
  let w: World;
  beforeAll(async () => {
    w = await startWorld({ events: ['composio.trigger.message', 'composio.trigger.disabled'] });
  });
  afterAll(() => w.close());

  it('makes the trigger need a reconnect, as an expiry does, and queues one trigger.disabled', async () => {
    const owner = await installationWithTrigger(w);
    // Composio stops the expired account's triggers by itself, and says so.
    const expired = await w.sim.controls.expireAccount(owner.accountId);
    expect(expired.delivery).toBeNull();
    expect(expired.triggersDisabled).toEqual([{ triggerId: owner.composioTriggerId, delivery: expect.objectContaining({ status: 200 }) }]);
    expect((await call(w, owner.auth, 'GET', `/v1/triggers/${owner.trigger.id}`)).json).toEqual({
      ...owner.trigger,
      status: 'needs_reconnect',
    });
    expect(await poll(w, owner.auth)).toEqual([
      expect.objectContaining({
        type: 'trigger.disabled',
        triggerId: owner.trigger.id,
        data: { reason: 'connection_expired', status: 'needs_reconnect' },
      }),
    ]);
    // Composio runs it again once the account is ACTIVE again (it re-enables such triggers itself).
    const state = w.sim.controls.state();
    expect(state.triggers.find((t) => t.id === owner.composioTriggerId)?.disabled_at).toEqual(expect.any(String));
  });
});

describe('a subscription that did not ask for composio.trigger.disabled', () => {
  let w: World;
  beforeAll(async () => {
    w = await startWorld({ events: ['composio.trigger.message'] });
  });
  afterAll(() => w.close());

  it('is not sent one', async () => {
    const owner = await installationWithTrigger(w);
    expect((await w.sim.controls.disableTrigger(owner.composioTriggerId, 'polling_failure_in_composio_infra')).delivery).toBeNull();
  });

  it('is driven from /_sim: a Stop button per running trigger, and the same as a JSON control', async () => {
    const owner = await installationWithTrigger(w);
    const row = async () => {
      const page = await (await fetch(`${w.sim.origin}/_sim`)).text();
      const at = page.indexOf(`<tr data-trigger="${owner.composioTriggerId}">`);
      return at < 0 ? '' : page.slice(at, page.indexOf('</tr>', at));
    };
    expect(await row()).toContain(`action="/_sim/triggers/${owner.composioTriggerId}/disable"`);
    const post = (reason: string) =>
      fetch(`${w.sim.origin}/_sim/triggers/${owner.composioTriggerId}/disable`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ reason }),
      });
    expect((await post('bored')).status).toBe(400);
    const stopped = await post('subscription_refresh_failure');
    expect(stopped.status).toBe(200);
    expect(await stopped.json()).toEqual({ triggerId: owner.composioTriggerId, delivery: null });
    const shown = await row();
    expect(shown).toContain('stopped by Composio (<code>subscription_refresh_failure</code>)');
    expect(shown).not.toContain('/disable"');
    // Composio does not stop a trigger twice.
    expect((await post('subscription_refresh_failure')).status).toBe(409);
  });
});

describe('redelivery', () => {
  const seen: Array<{ headers: IncomingHttpHeaders; status: number }> = [];
  let proxy: Server;
  let w: World;
  beforeAll(async () => {
    // In front of the broker: passes every delivery on, but tells Composio the first one failed
    // (as when the answer is lost on the way back).
    w = await startWorld({
      via: async (brokerUrl) => {
        proxy = createServer((req, res) => {
          const chunks: Buffer[] = [];
          req.on('data', (c: Buffer) => chunks.push(c));
          req.on('end', async () => {
            const headers = Object.fromEntries(
              Object.entries(req.headers).filter(([k]) => k.startsWith('webhook-') || k === 'content-type'),
            ) as Record<string, string>;
            const answer = await fetch(brokerUrl, { method: 'POST', headers, body: Buffer.concat(chunks) });
            const status = seen.length === 0 ? 503 : answer.status;
            seen.push({ headers: req.headers, status });
            res.writeHead(status, { 'content-type': 'application/json' }).end(await answer.text());
          });
        });
        await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
        return `http://127.0.0.1:${(proxy.address() as AddressInfo).port}/v1/webhooks/composio`;
      },
    });
  });
  afterAll(async () => {
    await w.close();
    await new Promise<void>((resolve) => proxy.close(() => resolve()));
  });

  it('sends again until answered 2xx, with the same webhook-id and a fresh signature; the broker stores the event once', async () => {
    const owner = await installationWithTrigger(w);
    const first = await w.sim.controls.fireTrigger(owner.composioTriggerId, { sender: 'ada@example.com', subject: 'Hi' });
    expect(first).toMatchObject({ status: 503, ok: false, attempt: 1 });
    await until(() => seen.length >= 2, 5_000, 'the redelivery');
    await new Promise((resolve) => setTimeout(resolve, 400));
    // Answered 2xx on the second attempt: no third.
    expect(seen.map((s) => [s.headers['x-composio-delivery-attempt'], s.status])).toEqual([
      ['1', 503],
      ['2', 200],
    ]);
    expect(new Set(seen.map((s) => s.headers['webhook-id']))).toEqual(new Set([first.webhookId]));
    expect(seen[1]!.headers['webhook-signature']).toEqual(expect.stringMatching(/^v1,/));
    const events = await poll(w, owner.auth);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ id: first.webhookId, type: 'trigger.event', triggerId: owner.trigger.id });
  });
});

describe('a Gmail trigger’s query', () => {
  let w: World;
  beforeAll(async () => {
    w = await startWorld();
  });
  afterAll(() => w.close());

  it('leaves out fired mail it excludes, and delivers the mail it finds', async () => {
    const owner = await installationWithTrigger(w, { filter: { from: 'boss@example.com', subject: 'report', words: 'quarterly' } });
    const excluded = [
      { sender: 'Ada <ada@example.com>', subject: 'Quarterly report' },
      { sender: 'The Boss <boss@example.com>', subject: 'Quarterly reports' },
      { sender: 'The Boss <boss@example.com>', subject: 'Report', message_text: 'Nothing about the quarter.' },
    ];
    for (const data of excluded) {
      const result = await w.sim.controls.fireTrigger(owner.composioTriggerId, data);
      expect(result).toMatchObject({ status: null, excludedByQuery: 'from:"boss@example.com" subject:"report" "quarterly"' });
    }
    expect(await poll(w, owner.auth)).toEqual([]);

    const found = await w.sim.controls.fireTrigger(owner.composioTriggerId, {
      sender: 'The Boss <BOSS@example.com>',
      subject: 'The quarterly report',
    });
    expect(found.status).toBe(200);
    const events = await poll(w, owner.auth);
    expect(events.map((e) => e.data.subject)).toEqual(['The quarterly report']);
  });

  it('matches a label by its Gmail name', async () => {
    const owner = await installationWithTrigger(w, { filter: { label: 'Work/Clients (EU)' } });
    const miss = await w.sim.controls.fireTrigger(owner.composioTriggerId, { subject: 'x', labelIds: ['INBOX'] });
    expect(miss.excludedByQuery).toBe('label:Work-Clients-EU');
    const hit = await w.sim.controls.fireTrigger(owner.composioTriggerId, { subject: 'y', labelIds: ['INBOX', 'Work/Clients (EU)'] });
    expect(hit.status).toBe(200);
  });
});
