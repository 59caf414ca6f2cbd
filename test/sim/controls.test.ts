import { afterEach, describe, expect, it } from 'vitest';
import { findTriggerType } from '../../src/sim/catalog.js';
import { type Simulator, startSimulator } from '../../src/sim/index.js';
import { signedWith, startReceiver } from './receiver.js';

/** The developer controls under /_sim, over HTTP (JSON and the HTML forms). */

let sim: Simulator;
let receiver: Awaited<ReturnType<typeof startReceiver>> | undefined;
afterEach(async () => {
  await sim?.close();
  await receiver?.close();
});

/** Composio's JSON as the tests read it: loosely, field by field. */
type Loose = Record<string, any>;

async function api(method: string, path: string, body?: unknown): Promise<{ status: number; json: Loose }> {
  const res = await fetch(`${sim.origin}${path}`, {
    method,
    headers: { 'x-api-key': sim.apiKey, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, json: (await res.json()) as Loose };
}

const form = (path: string, fields: Record<string, string>) =>
  fetch(`${sim.origin}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(fields).toString(),
    redirect: 'manual',
  });

/** A Session with an ACTIVE Gmail account, a trigger on it, and a subscription to `receiver`. */
async function world() {
  receiver = await startReceiver();
  const secret = (
    await api('POST', '/api/v3.1/webhook_subscriptions', {
      webhook_url: receiver.url,
      enabled_events: ['composio.trigger.message', 'composio.connected_account.expired'],
    })
  ).json.secret as string;
  const account = sim.controls.createAccount({ userId: 'omb_user1', toolkit: 'gmail', alias: 'work', status: 'ACTIVE' });
  const trigger = (
    await api('POST', '/api/v3.1/trigger_instances/GMAIL_NEW_GMAIL_MESSAGE/upsert', {
      connected_account_id: account.id,
      user_id: 'omb_user1',
      trigger_config: {},
    })
  ).json.trigger_id as string;
  return { secret, account, trigger };
}

describe('/_sim controls', () => {
  it('fires a trigger as a signed webhook and returns what the receiver answered', async () => {
    sim = await startSimulator({ apiKey: 'k', logger: false });
    const { secret, trigger } = await world();
    if (!receiver) throw new Error('no receiver');
    receiver.status = 503;
    const fired = await fetch(`${sim.origin}/_sim/triggers/${trigger}/fire`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ data: { subject: 'From the control' } }),
    });
    expect(fired.status).toBe(200);
    expect(await fired.json()).toMatchObject({ webhookId: expect.stringMatching(/^msg_/), url: receiver.url, status: 503, ok: false });
    const delivered = receiver.received[0];
    expect(JSON.parse(delivered?.body.toString() ?? '{}')).toMatchObject({
      type: 'composio.trigger.message',
      data: { subject: 'From the control' },
      metadata: { trigger_id: trigger },
    });
    expect(signedWith(delivered, secret)).toEqual({ ok: true });
  });

  it('refuses to fire a disabled or unknown trigger', async () => {
    sim = await startSimulator({ apiKey: 'k', logger: false });
    const { trigger } = await world();
    await api('PATCH', `/api/v3.1/trigger_instances/manage/${trigger}`, { status: 'disable' });
    expect((await fetch(`${sim.origin}/_sim/triggers/${trigger}/fire`, { method: 'POST' })).status).toBe(409);
    expect((await fetch(`${sim.origin}/_sim/triggers/ti_nope/fire`, { method: 'POST' })).status).toBe(404);
  });

  it('expires an account and delivers composio.connected_account.expired', async () => {
    sim = await startSimulator({ apiKey: 'k', logger: false });
    const { account } = await world();
    const res = await fetch(`${sim.origin}/_sim/accounts/${account.id}/expire`, { method: 'POST' });
    expect(await res.json()).toMatchObject({ account: { id: account.id, status: 'EXPIRED' }, delivery: { status: 200, ok: true } });
    expect(JSON.parse(receiver?.received[0]?.body.toString() ?? '{}')).toMatchObject({
      type: 'composio.connected_account.expired',
      data: { id: account.id, status: 'EXPIRED' },
    });
    expect((await api('GET', `/api/v3.1/connected_accounts/${account.id}`)).json.status).toBe('EXPIRED');
  });

  it('dumps the state without secrets or tokens', async () => {
    sim = await startSimulator({ apiKey: 'sim_distinctive_project_key', logger: false });
    const { secret, account } = await world();
    const text = await (await fetch(`${sim.origin}/_sim/state`)).text();
    const state = JSON.parse(text);
    expect(state.accounts).toEqual([expect.objectContaining({ id: account.id, status: 'ACTIVE' })]);
    expect(state.webhookSubscriptions).toHaveLength(1);
    expect(text).not.toContain(secret);
    expect(text).not.toMatch(/access_token|sim-[A-Za-z0-9_-]{20}/);
    expect(text).not.toContain('sim_distinctive_project_key');
  });

  it('injects faults and records requests over HTTP', async () => {
    sim = await startSimulator({ apiKey: 'k', logger: false });
    const armed = await fetch(`${sim.origin}/_sim/faults`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ status: 500, times: 2 }),
    });
    expect(await armed.json()).toMatchObject({ faults: [{ spec: { status: 500, times: 2 }, remaining: 2 }] });
    expect((await api('GET', '/api/v3/toolkits')).status).toBe(500);
    expect((await api('GET', '/api/v3/toolkits')).status).toBe(500);
    expect((await api('GET', '/api/v3/toolkits')).status).toBe(200);
    const log = (await (await fetch(`${sim.origin}/_sim/requests`)).json()) as { requests: { status: number }[] };
    expect(log.requests.map((r) => r.status)).toEqual([500, 500, 200]);
    expect(
      (
        await fetch(`${sim.origin}/_sim/faults`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{"status": 200}',
        })
      ).status,
    ).toBe(400);
  });

  it('serves an index page whose forms work and redirect back with a notice', async () => {
    sim = await startSimulator({ apiKey: 'k', logger: false });
    const { account, trigger } = await world();
    const index = await (await fetch(`${sim.origin}/_sim`)).text();
    expect(index).toContain('Composio simulator');
    expect(index).toContain(account.id);
    expect(index).toContain(`/_sim/triggers/${trigger}/fire`);
    const fired = await form(`/_sim/triggers/${trigger}/fire`, { data: '{"subject":"<b>hi</b>"}' });
    expect(fired.status).toBe(303);
    const location = fired.headers.get('location') ?? '';
    expect(location).toMatch(/^\/_sim\?notice=/);
    const after = await (await fetch(`${sim.origin}${location}`)).text();
    expect(after).toMatch(/Fired ti_\w+: msg_\w+ to .* answered 200/);
    // From the page, the typed fields are laid over the trigger type's sample event.
    expect(JSON.parse(receiver?.received[0]?.body.toString() ?? '{}').data).toEqual({
      ...findTriggerType('GMAIL_NEW_GMAIL_MESSAGE')?.sample,
      subject: '<b>hi</b>',
    });
    const expired = await form(`/_sim/accounts/${account.id}/expire`, {});
    expect(expired.status).toBe(303);
  });

  it('answers Expire as it answers Fire: a form goes back to the page with a notice, a JSON client gets JSON, both for a failure too', async () => {
    sim = await startSimulator({ apiKey: 'k', logger: false });
    const { account, trigger } = await world();
    const json = (path: string, body?: unknown) =>
      fetch(`${sim.origin}${path}`, {
        method: 'POST',
        headers: body === undefined ? {} : { 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        redirect: 'manual',
      });
    const noticeAfter = async (response: Response) => {
      expect(response.status).toBe(303);
      expect(await response.text()).toBe('');
      const location = response.headers.get('location') ?? '';
      expect(location).toMatch(/^\/_sim\?notice=/);
      const page = await (await fetch(`${sim.origin}${location}`)).text();
      return /<p class="notice" role="status">([^<]*)<\/p>/.exec(page)?.[1];
    };

    // The page's forms, as a browser posts them (Expire's has no fields: an empty body).
    expect(await noticeAfter(await form(`/_sim/triggers/${trigger}/fire`, { data: '' }))).toMatch(
      /^Fired ti_\w+: msg_\w+ to .* answered 200$/,
    );
    // JSON clients, with a body or none (before the account expires: its trigger stops with it).
    for (const fired of [await json(`/_sim/triggers/${trigger}/fire`), await json(`/_sim/triggers/${trigger}/fire`, {})]) {
      expect(fired.status).toBe(200);
      expect(fired.headers.get('content-type')).toContain('application/json');
      expect(await fired.json()).toMatchObject({ webhookId: expect.stringMatching(/^msg_/), status: 200, ok: true });
    }
    expect(await noticeAfter(await form(`/_sim/accounts/${account.id}/expire`, {}))).toMatch(
      // The account's running trigger stops with it, as Composio stops it (connection_expired).
      new RegExp(`^${account.id} is EXPIRED; webhook msg_\\w+ to .* answered 200; 1 trigger\\(s\\) disabled \\(connection_expired\\)$`),
    );

    // JSON clients, with a body or none.
    for (const expired of [await json(`/_sim/accounts/${account.id}/expire`), await json(`/_sim/accounts/${account.id}/expire`, {})]) {
      expect(expired.status).toBe(200);
      expect(expired.headers.get('content-type')).toContain('application/json');
      expect(await expired.json()).toMatchObject({ account: { id: account.id, status: 'EXPIRED' }, delivery: { status: 200 } });
    }

    // A failure: the page again, saying why, for a form; Composio's error JSON for a JSON client.
    for (const path of ['/_sim/triggers/ti_nope/fire', '/_sim/accounts/ca_nope/expire']) {
      const fromPage = await form(path, {});
      expect(fromPage.status, path).toBe(404);
      expect(fromPage.headers.get('content-type')).toContain('text/html');
      expect(await fromPage.text()).toMatch(/<p class="error" role="alert" id="error">[^<]*nope/);
      const fromJson = await json(path, {});
      expect(fromJson.status, path).toBe(404);
      expect(fromJson.headers.get('content-type')).toContain('application/json');
      expect(((await fromJson.json()) as Loose).error).toMatchObject({ message: expect.stringContaining('nope') });
    }
  });

  it('tells how the CLI reaches the broker’s database as docs/operators.md does, with no password on the page', async () => {
    sim = await startSimulator({ apiKey: 'k', logger: false });
    const index = await (await fetch(`${sim.origin}/_sim`)).text();
    expect(index).toContain('Which database the CLI uses');
    expect(index).not.toMatch(/postgres:postgres|omb_broker/);
  });

  it('shows a consent page naming the app and label, and records the answer', async () => {
    sim = await startSimulator({ apiKey: 'k', logger: false });
    const session = (await api('POST', '/api/v3.1/tool_router/session', { user_id: 'omb_user1' })).json;
    const link = (
      await api('POST', `/api/v3.1/tool_router/session/${session.session_id}/link`, {
        toolkit: 'googlecalendar',
        alias: '<work>',
        callback_url: 'https://app.example/done?x=1',
      })
    ).json;
    const pageHtml = await (await fetch(link.redirect_url)).text();
    expect(pageHtml).toContain('Connect Google Calendar');
    expect(pageHtml).toContain('&lt;work&gt;');
    expect(pageHtml).not.toContain('<work>');
    expect(pageHtml).toMatch(/<button[^>]*>Authorize<\/button>/);
    expect(pageHtml).toMatch(/<button[^>]*>Deny<\/button>/);
    const token = new URL(link.redirect_url).pathname.split('/').pop() ?? '';
    const denied = await form(`/_sim/connect/${token}/deny`, {});
    expect(denied.status).toBe(303);
    const target = new URL(denied.headers.get('location') ?? '');
    expect(`${target.origin}${target.pathname}`).toBe('https://app.example/done');
    expect(Object.fromEntries(target.searchParams)).toEqual({ x: '1', status: 'failed', connected_account_id: link.connected_account_id });
    expect((await api('GET', `/api/v3.1/connected_accounts/${link.connected_account_id}`)).json.status).toBe('FAILED');
    expect(await (await fetch(link.redirect_url)).text()).toContain('Access denied');
    const again = await form(`/_sim/connect/${token}/authorize`, {});
    expect(again.status).toBe(409);
    expect(await again.text()).toContain('already denied');
    expect((await fetch(`${sim.origin}/_sim/connect/ln_unknown`)).status).toBe(404);
  });
});
