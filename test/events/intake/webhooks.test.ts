import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signWebhook } from '../../../src/composio/webhook-signature.js';
import { register } from '../../support/app.js';
import {
  accountExpired,
  buildEventsApp,
  countEvents,
  type EventsTestApp,
  insertTrigger,
  poll,
  post,
  SECRET,
  type SignedWebhook,
  signed,
  triggerMessage,
} from '../helpers.js';

const OLD_SECRET = 'whsec_rotated_out_but_still_accepted';
let t: EventsTestApp;
beforeAll(async () => {
  t = await buildEventsApp({ COMPOSIO_WEBHOOK_SECRET: `${SECRET},${OLD_SECRET}`, BAD_WEBHOOKS_PER_MINUTE: '1000' });
});
afterAll(() => t.close());

describe('a signed trigger message', () => {
  it('is queued for the trigger’s installation with the event shape of the contract', async () => {
    const owner = await register(t.app);
    const trigger = await insertTrigger(t.database, owner.installationId);
    const webhook = signed(triggerMessage(trigger, { issue: { title: 'Crash on start' } }), { at: t.clock.now() });

    const response = await post(t, webhook);
    expect(response.statusCode).toBe(200);
    expect(response.json()).toEqual({ outcome: 'accepted' });

    const { events } = await poll(t, owner.auth);
    expect(events).toEqual([
      {
        id: webhook.id,
        type: 'trigger.event',
        triggerId: trigger.id,
        automationId: trigger.automationId,
        toolkit: trigger.toolkit,
        triggerSlug: trigger.triggerSlug,
        connectedAccountId: trigger.connectedAccountId,
        receivedAt: t.clock.now().toISOString(),
        data: { issue: { title: 'Crash on start' } },
      },
    ]);
  });

  it('is accepted when signed with any configured secret (rotation)', async () => {
    const owner = await register(t.app);
    const trigger = await insertTrigger(t.database, owner.installationId);
    const response = await post(t, signed(triggerMessage(trigger), { at: t.clock.now(), secret: OLD_SECRET }));
    expect(response.json()).toEqual({ outcome: 'accepted' });
  });

  it('is stored once when Composio redelivers it, and the redelivery costs no quota', async () => {
    const owner = await register(t.app);
    const trigger = await insertTrigger(t.database, owner.installationId);
    const webhook = signed(triggerMessage(trigger), { at: t.clock.now() });
    expect((await post(t, webhook)).json()).toEqual({ outcome: 'accepted' });
    const again = await post(t, signed(webhook.body, { id: webhook.id, at: t.clock.now() }));
    expect(again.statusCode).toBe(200);
    expect(again.json()).toEqual({ outcome: 'duplicate' });
    expect(await countEvents(t.database, owner.installationId)).toBe(1);
    const [usage] = await t.database.sql`select kept, skipped from daily_usage where installation_id = ${owner.installationId}`;
    expect(usage).toEqual({ kept: 1, skipped: 0 });
    expect(t.events.outcomes.totals().duplicate).toBeGreaterThanOrEqual(1);
  });

  it('keeps payloads Postgres would refuse (NUL characters) instead of failing every retry', async () => {
    const owner = await register(t.app);
    const trigger = await insertTrigger(t.database, owner.installationId);
    const response = await post(t, signed(triggerMessage(trigger, { text: 'a\u0000b', 'k\u0000': 1 }), { at: t.clock.now() }));
    expect(response.json()).toEqual({ outcome: 'accepted' });
    const { events } = await poll(t, owner.auth);
    // Stored encrypted as the delivery's text, the NULs come back as sent (in clear, as U+FFFD).
    expect(events[0]!.data).toEqual({ text: 'a\u0000b', 'k\u0000': 1 });
  });
});

describe('what is answered 200 and not queued', () => {
  it('an unknown trigger', async () => {
    const owner = await register(t.app);
    const trigger = await insertTrigger(t.database, owner.installationId);
    const message = triggerMessage({ ...trigger, composioTriggerId: 'ti_nobody_knows' });
    const response = await post(t, signed(message, { at: t.clock.now() }));
    expect(response.statusCode).toBe(200);
    expect(response.json()).toEqual({ outcome: 'unknown_trigger' });
    expect(await countEvents(t.database, owner.installationId)).toBe(0);
  });

  it('a paused trigger', async () => {
    const owner = await register(t.app);
    const trigger = await insertTrigger(t.database, owner.installationId, { enabled: false });
    expect((await post(t, signed(triggerMessage(trigger), { at: t.clock.now() }))).json()).toEqual({ outcome: 'paused' });
    expect(await countEvents(t.database, owner.installationId)).toBe(0);
  });

  it('a message naming another Composio user than the trigger’s owner (logged)', async () => {
    const owner = await register(t.app);
    const other = await register(t.app);
    const trigger = await insertTrigger(t.database, owner.installationId);
    const message = triggerMessage(trigger, {}, { userId: `omb_${other.installationId.replaceAll('-', '')}` });
    expect((await post(t, signed(message, { at: t.clock.now() }))).json()).toEqual({ outcome: 'user_mismatch' });
    expect(await countEvents(t.database, owner.installationId)).toBe(0);
    expect(await countEvents(t.database, other.installationId)).toBe(0);
    expect(t.logs.text).toContain('does not own the trigger');
  });

  it('an event that does not match its trigger’s filter, without counting against the quota', async () => {
    const owner = await register(t.app);
    const trigger = await insertTrigger(t.database, owner.installationId, { filter: { 'issue.title': 'crash', action: 'opened' } });
    const miss = await post(
      t,
      signed(triggerMessage(trigger, { action: 'opened', issue: { title: 'Feature request' } }), { at: t.clock.now() }),
    );
    expect(miss.json()).toEqual({ outcome: 'filtered' });
    const hit = await post(
      t,
      signed(triggerMessage(trigger, { action: 'opened', issue: { title: 'CRASH on exit' } }), { at: t.clock.now() }),
    );
    expect(hit.json()).toEqual({ outcome: 'accepted' });
    expect(await countEvents(t.database, owner.installationId)).toBe(1);
    const [usage] = await t.database.sql`select kept, skipped from daily_usage where installation_id = ${owner.installationId}`;
    expect(usage).toEqual({ kept: 1, skipped: 0 });
  });

  it('never filters Gmail here: Gmail applied the filter as its search query', async () => {
    const owner = await register(t.app);
    const trigger = await insertTrigger(t.database, owner.installationId, {
      toolkit: 'gmail',
      triggerSlug: 'GMAIL_NEW_GMAIL_MESSAGE',
      filter: { from: 'boss@example.com' },
    });
    const response = await post(t, signed(triggerMessage(trigger, { sender: 'someone@else.org' }), { at: t.clock.now() }));
    expect(response.json()).toEqual({ outcome: 'accepted' });
  });

  it('other event types and payload versions', async () => {
    const other = { id: 'msg_x', timestamp: new Date().toISOString(), type: 'composio.trigger.state_changed', metadata: {}, data: {} };
    expect((await post(t, signed(other, { at: t.clock.now() }))).json()).toEqual({ outcome: 'ignored' });
    const v2 = { type: 'github_issue_added_event', timestamp: new Date().toISOString(), data: { trigger_nano_id: 'ti_x' } };
    expect((await post(t, signed(v2, { at: t.clock.now() }))).json()).toEqual({ outcome: 'ignored' });
  });

  it('but a correctly signed body that is not JSON is 400', async () => {
    const response = await post(t, signed('{"type": "composio.trigger.message", ', { at: t.clock.now() }));
    expect(response.statusCode).toBe(400);
    expect(response.json()).toMatchObject({ code: 'invalid_json' });
  });
});

describe('an expired connected account', () => {
  it('marks the account’s triggers as needing a reconnect and queues one connection.expired', async () => {
    const owner = await register(t.app);
    const first = await insertTrigger(t.database, owner.installationId, { connectedAccountId: 'ca_expiring' });
    const second = await insertTrigger(t.database, owner.installationId, { connectedAccountId: 'ca_expiring' });
    const unrelated = await insertTrigger(t.database, owner.installationId, { connectedAccountId: 'ca_fine' });
    const webhook = signed(accountExpired(first.composioUserId, 'ca_expiring'), { at: t.clock.now() });

    expect((await post(t, webhook)).json()).toEqual({ outcome: 'accepted' });
    expect((await post(t, signed(webhook.body, { id: webhook.id, at: t.clock.now() }))).json()).toEqual({ outcome: 'duplicate' });

    const rows = await t.database.sql<{ id: string; needs_reconnect_at: string | null }[]>`
      select id, needs_reconnect_at from triggers where installation_id = ${owner.installationId}`;
    const marked = new Map(rows.map((r) => [r.id, r.needs_reconnect_at !== null]));
    expect(marked.get(first.id)).toBe(true);
    expect(marked.get(second.id)).toBe(true);
    expect(marked.get(unrelated.id)).toBe(false);

    const { events } = await poll(t, owner.auth);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({
      id: webhook.id,
      type: 'connection.expired',
      triggerId: null,
      automationId: null,
      toolkit: 'github',
      connectedAccountId: 'ca_expiring',
      data: { connectedAccountId: 'ca_expiring', toolkit: 'github' },
    });
    expect(events[0]!.data.triggers.map((x: { triggerId: string }) => x.triggerId).sort()).toEqual([first.id, second.id].sort());
  });

  it('of a user that is no installation is answered 200 and changes nothing', async () => {
    const response = await post(t, signed(accountExpired('omb_00000000000000000000000000000000', 'ca_unknown'), { at: t.clock.now() }));
    expect(response.statusCode).toBe(200);
    expect(response.json()).toEqual({ outcome: 'unknown_account' });
  });
});

describe('a bad signature', () => {
  // Each case breaks one thing about an otherwise valid delivery.
  const variants: Array<[string, (w: SignedWebhook, now: Date) => { headers: Record<string, string | undefined>; body: string }]> = [
    ['no webhook-id', (w) => ({ headers: { ...w.headers, 'webhook-id': undefined }, body: w.body })],
    ['no webhook-timestamp', (w) => ({ headers: { ...w.headers, 'webhook-timestamp': undefined }, body: w.body })],
    ['no webhook-signature', (w) => ({ headers: { ...w.headers, 'webhook-signature': undefined }, body: w.body })],
    [
      'a wrong secret',
      (w) => ({ headers: { ...w.headers, ...signed(w.body, { id: w.id, secret: 'whsec_wrong' }).headers }, body: w.body }),
    ],
    ['a stale timestamp (301 s old)', (w, now) => resign(w, new Date(now.getTime() - 301_000))],
    ['a future timestamp (301 s ahead)', (w, now) => resign(w, new Date(now.getTime() + 301_000))],
    [
      'a timestamp changed after signing',
      (w) => ({ headers: { ...w.headers, 'webhook-timestamp': String(Number(w.headers['webhook-timestamp']) + 1) }, body: w.body }),
    ],
    ['a webhook-id changed after signing', (w) => ({ headers: { ...w.headers, 'webhook-id': `${w.id}x` }, body: w.body })],
    ['the body altered by one byte', (w) => ({ headers: w.headers, body: w.body.replace('"data":{', '"data":{ ') })],
    ['the body with one byte removed', (w) => ({ headers: w.headers, body: w.body.slice(0, -1) })],
    [
      'a truncated signature',
      (w) => ({ headers: { ...w.headers, 'webhook-signature': w.headers['webhook-signature']!.slice(0, -4) }, body: w.body }),
    ],
    [
      'a signature without the v1 prefix',
      (w) => ({ headers: { ...w.headers, 'webhook-signature': w.headers['webhook-signature']!.slice(3) }, body: w.body }),
    ],
    [
      'a signature of another version',
      (w) => ({ headers: { ...w.headers, 'webhook-signature': w.headers['webhook-signature']!.replace('v1,', 'v2,') }, body: w.body }),
    ],
    ['an empty signature', (w) => ({ headers: { ...w.headers, 'webhook-signature': '' }, body: w.body })],
    ['a non-numeric timestamp', (w) => ({ headers: { ...w.headers, 'webhook-timestamp': 'yesterday' }, body: w.body })],
  ];

  function resign(w: SignedWebhook, at: Date) {
    return { headers: signed(w.body, { id: w.id, at }).headers, body: w.body };
  }

  it.each(variants)('with %s is refused with 401 and nothing is stored', async (_name, breakIt) => {
    const owner = await register(t.app);
    const trigger = await insertTrigger(t.database, owner.installationId);
    const broken = breakIt(signed(triggerMessage(trigger, { n: 1 }), { at: t.clock.now() }), t.clock.now());
    const headers = Object.fromEntries(Object.entries(broken.headers).filter(([, v]) => v !== undefined)) as Record<string, string>;

    const response = await t.app.inject({ method: 'POST', url: '/v1/webhooks/composio', headers, payload: broken.body });
    expect(response.statusCode).toBe(401);
    expect(response.json()).toEqual({ error: 'webhook signature is missing or invalid', code: 'invalid_signature' });
    expect(await countEvents(t.database, owner.installationId)).toBe(0);
    const usage = await t.database.sql`select 1 from daily_usage where installation_id = ${owner.installationId}`;
    expect(usage).toHaveLength(0);
  });

  it('is checked before the body is parsed (garbage with a bad signature is 401, not 400)', async () => {
    const response = await t.app.inject({
      method: 'POST',
      url: '/v1/webhooks/composio',
      headers: {
        'content-type': 'application/json',
        'webhook-id': 'msg_1',
        'webhook-timestamp': String(Math.floor(Date.now() / 1000)),
        'webhook-signature': 'v1,AAAA',
      },
      payload: '{not json',
    });
    expect(response.statusCode).toBe(401);
  });

  it('accepts a timestamp just inside the 300 s tolerance', async () => {
    const owner = await register(t.app);
    const trigger = await insertTrigger(t.database, owner.installationId);
    const at = new Date(t.clock.now().getTime() - 299_000);
    expect((await post(t, signed(triggerMessage(trigger), { at }))).json()).toEqual({ outcome: 'accepted' });
  });

  it('accepts the right signature among several', async () => {
    const owner = await register(t.app);
    const trigger = await insertTrigger(t.database, owner.installationId);
    const webhook = signed(triggerMessage(trigger), { at: t.clock.now() });
    const wrong = signWebhook({
      id: webhook.id,
      timestamp: webhook.headers['webhook-timestamp']!,
      body: webhook.body,
      secret: 'whsec_other',
    });
    webhook.headers['webhook-signature'] = `${wrong} ${webhook.headers['webhook-signature']}`;
    expect((await post(t, webhook)).json()).toEqual({ outcome: 'accepted' });
  });
});

describe('limits', () => {
  it('refuses a body over 1 MiB with 413', async () => {
    const owner = await register(t.app);
    const trigger = await insertTrigger(t.database, owner.installationId);
    const response = await post(t, signed(triggerMessage(trigger, { blob: 'x'.repeat(1024 * 1024) }), { at: t.clock.now() }));
    expect(response.statusCode).toBe(413);
    expect(await countEvents(t.database, owner.installationId)).toBe(0);
  });

  it('takes a payload well over the JSON API’s limit (a large e-mail)', async () => {
    const owner = await register(t.app);
    const trigger = await insertTrigger(t.database, owner.installationId);
    const response = await post(t, signed(triggerMessage(trigger, { body: 'x'.repeat(600 * 1024) }), { at: t.clock.now() }));
    expect(response.json()).toEqual({ outcome: 'accepted' });
  });

  it('rate-limits an address after a flood of bad signatures, counting only failures', async () => {
    // Registrations from this file's other apps count in the same shared counters.
    const limited = await buildEventsApp({ BAD_WEBHOOKS_PER_MINUTE: '3', REGISTRATIONS_PER_MINUTE: '1000' }, { database: t.database });
    try {
      const owner = await register(limited.app);
      const trigger = await insertTrigger(limited.database, owner.installationId);
      const good = () => signed(triggerMessage(trigger), { at: limited.clock.now() });
      const bad = () => signed(triggerMessage(trigger), { at: limited.clock.now(), secret: 'whsec_wrong' });

      // Successes never count.
      for (let i = 0; i < 5; i++) expect((await post(limited, good(), { ip: '10.0.0.1' })).statusCode).toBe(200);
      for (let i = 0; i < 3; i++) expect((await post(limited, bad(), { ip: '10.0.0.1' })).statusCode).toBe(401);
      const refused = await post(limited, good(), { ip: '10.0.0.1' });
      expect(refused.statusCode).toBe(429);
      expect(refused.json()).toMatchObject({ code: 'rate_limited' });
      expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
      // Another address is not affected.
      expect((await post(limited, good(), { ip: '10.0.0.2' })).statusCode).toBe(200);
      // The next minute (Postgres's: the window is shared by every process) the address may try again.
      await limited.database.sql`update rate_limit_counters set resets_at = now() where key like 'bad-webhook-signature|%'`;
      limited.clock.advance(60_000);
      expect((await post(limited, good(), { ip: '10.0.0.1' })).statusCode).toBe(200);
      expect(limited.events.outcomes.totals()).toMatchObject({ bad_signature: 3, rate_limited: 1 });
    } finally {
      await limited.close();
    }
  });
});
