import { once } from 'node:events';
import { request as httpRequest } from 'node:http';
import type { Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countEvents, insertTrigger, SECRET, signed, triggerMessage } from '../events/helpers.js';
import { buildTestApp, type TestApp } from '../support/app.js';
import { metricValue, type RawAnswer, rawRequest, registerOver, until } from '../support/http.js';

/**
 * Two client faults over real sockets: a long-poll whose client hangs up, and a flood of badly
 * signed webhooks from one address. Each loopback address (127.0.0.x) is a different source.
 */

const METRICS_TOKEN = 'metrics-token-disconnect-and-flood';
const BAD_WEBHOOKS_PER_MINUTE = 10;

let t: TestApp;
let url: string;
beforeAll(async () => {
  t = await buildTestApp({
    COMPOSIO_WEBHOOK_SECRET: SECRET,
    METRICS_TOKEN,
    BAD_WEBHOOKS_PER_MINUTE: String(BAD_WEBHOOKS_PER_MINUTE),
  });
  url = await t.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(() => t.close());

async function metric(name: string, labels: Record<string, string> = {}): Promise<number> {
  const response = await rawRequest(`${url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
  expect(response.status).toBe(200);
  return metricValue(response.body, name, labels) ?? 0;
}
const pollsWaiting = () => metric('omb_long_polls_waiting');

function postWebhook(webhook: { headers: Record<string, string>; body: string }, from: string): Promise<RawAnswer> {
  return rawRequest(`${url}/v1/webhooks/composio`, { method: 'POST', headers: webhook.headers, body: webhook.body, localAddress: from });
}

describe('a client that disconnects mid-poll', () => {
  it('leaves the waiting room at once; the others keep waiting and nothing is acknowledged', async () => {
    const owner = await registerOver(url);
    const trigger = await insertTrigger(t.database, owner.installationId);

    const leaving = new AbortController();
    const gone = rawRequest(`${url}/v1/events?wait=25`, { headers: owner.auth, signal: leaving.signal }).catch((error: Error) => error);
    const staying = rawRequest(`${url}/v1/events?wait=25`, { headers: owner.auth });
    await until(async () => (await pollsWaiting()) === 2, 5000, 'two polls waiting');

    const abortedAt = performance.now();
    leaving.abort();
    expect(await gone).toBeInstanceOf(Error);
    await until(async () => (await pollsWaiting()) === 1, 5000, 'the hung-up poll gone');
    expect(performance.now() - abortedAt).toBeLessThan(500);

    // The poll still waiting is woken as usual.
    const webhook = signed(triggerMessage(trigger, { n: 1 }), { at: t.clock.now() });
    expect((await postWebhook(webhook, '127.0.0.1')).json).toEqual({ outcome: 'accepted' });
    const answer = await staying;
    expect(answer.status).toBe(200);
    expect(answer.json.events.map((e: { id: string }) => e.id)).toEqual([webhook.id]);
    expect(await pollsWaiting()).toBe(0);

    // The hung-up poll acknowledged nothing: a fresh poll without a cursor gets the event again.
    const again = await rawRequest(`${url}/v1/events?wait=0`, { headers: owner.auth });
    expect(again.json.events.map((e: { id: string }) => e.id)).toEqual([webhook.id]);
  });

  it('forgets a poll whose client hung up while it was still being authenticated', async () => {
    const owner = await registerOver(url);
    // The token check then writes last_seen_at, which the lock below holds up.
    await t.database.sql`update installations set last_seen_at = now() - interval '1 hour' where id = ${owner.installationId}`;
    const blocker = await t.database.sql.reserve();
    try {
      await blocker`begin`;
      await blocker`select 1 from installations where id = ${owner.installationId} for update`;
      const leaving = new AbortController();
      const serverSide = nextConnection();
      const poll = rawRequest(`${url}/v1/events?wait=25`, { headers: owner.auth, signal: leaving.signal }).catch((error: Error) => error);
      const socket = await serverSide;
      await until(
        async () => {
          const [row] = await t.database.sql<{ n: number }[]>`
          select count(*)::int as n from pg_stat_activity
           where datname = current_database() and wait_event_type = 'Lock' and query like '%last_seen_at%'`;
          return row!.n > 0;
        },
        5000,
        'the token check waiting on the lock',
      );
      const hungUp = once(socket, 'close');
      leaving.abort();
      await poll;
      await hungUp;
    } finally {
      await blocker`commit`;
      blocker.release();
    }
    await until(async () => (await pollsWaiting()) === 0, 3000, 'the hung-up poll gone');
  });
});

/** The server's side of the next connection a client opens. */
function nextConnection(): Promise<Socket> {
  return new Promise((resolve) => t.app.server.once('connection', resolve));
}

describe('a flood of bad signatures from one address', () => {
  it('gets cheap 401s, then 429 before its bodies are even read; nothing is stored; another address is still served', async () => {
    const owner = await registerOver(url);
    const trigger = await insertTrigger(t.database, owner.installationId);
    const [usageBefore] = await t.database.sql<{ rows: number; kept: number }[]>`
      select count(*)::int as rows, coalesce(sum(kept), 0)::int as kept from daily_usage`;
    const eventsBefore = await countEvents(t.database);
    const badBefore = await metric('omb_webhooks_total', { outcome: 'bad_signature' });
    const limitedBefore = await metric('omb_webhooks_total', { outcome: 'rate_limited' });

    // Well-formed messages for a real trigger: had any got through, it would have been queued.
    const forged = (n: number) => {
      const message = signed(triggerMessage(trigger, { forged: n }), { at: t.clock.now(), secret: 'whsec_the_attackers_guess' });
      const variants: Array<Record<string, string>> = [
        message.headers,
        { ...message.headers, 'webhook-signature': 'v1,AAAA' },
        { ...message.headers, 'webhook-timestamp': String(Math.floor(t.clock.now().getTime() / 1000) - 3600) },
        { 'content-type': 'application/json' },
      ];
      return { headers: variants[n % variants.length]!, body: message.body };
    };

    const attacker = '127.0.0.2';
    for (let n = 0; n < BAD_WEBHOOKS_PER_MINUTE; n += 1) {
      const answer = await postWebhook(forged(n), attacker);
      expect(answer.status).toBe(401);
      expect(answer.json).toEqual({ error: 'webhook signature is missing or invalid', code: 'invalid_signature' });
    }
    const burst = await Promise.all(Array.from({ length: 40 }, (_, n) => postWebhook(forged(n), attacker)));
    for (const answer of burst) {
      expect(answer.status).toBe(429);
      expect(answer.json).toEqual({ error: 'too many webhooks with bad signatures from this address', code: 'rate_limited' });
      expect(Number(answer.headers['retry-after'])).toBeGreaterThan(0);
    }

    // Refused before the body is read: a 429 arrives though the (large) body is never sent.
    const unread = await headersOnly(`${url}/v1/webhooks/composio`, attacker, 900_000);
    expect(unread).toBe(429);

    // Another address, signing correctly, is served as usual.
    const good = signed(triggerMessage(trigger, { genuine: true }), { at: t.clock.now() });
    const accepted = await postWebhook(good, '127.0.0.3');
    expect(accepted.status).toBe(200);
    expect(accepted.json).toEqual({ outcome: 'accepted' });

    const poll = await rawRequest(`${url}/v1/events?wait=0`, { headers: owner.auth });
    expect(poll.json.events.map((e: { id: string }) => e.id)).toEqual([good.id]);
    expect(await countEvents(t.database)).toBe(eventsBefore + 1);
    const [usageAfter] = await t.database.sql<{ rows: number; kept: number }[]>`
      select count(*)::int as rows, coalesce(sum(kept), 0)::int as kept from daily_usage`;
    expect(usageAfter).toEqual({ rows: usageBefore!.rows + 1, kept: usageBefore!.kept + 1 });
    expect(await metric('omb_webhooks_total', { outcome: 'bad_signature' })).toBe(badBefore + BAD_WEBHOOKS_PER_MINUTE);
    expect(await metric('omb_webhooks_total', { outcome: 'rate_limited' })).toBe(limitedBefore + burst.length + 1);
  });
});

/** Sends only the headers of a POST announcing `length` bytes, and resolves with the status the server answers. */
function headersOnly(target: string, localAddress: string, length: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(target, {
      method: 'POST',
      localAddress,
      agent: false,
      headers: { 'content-type': 'application/json', 'content-length': String(length), 'webhook-id': 'msg_x' },
    });
    request.on('response', (response) => {
      resolve(response.statusCode ?? 0);
      response.resume();
      request.destroy();
    });
    request.on('error', reject);
    request.flushHeaders();
  });
}
