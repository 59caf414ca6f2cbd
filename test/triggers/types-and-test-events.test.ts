import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { utcDay } from '../../src/clock.js';
import { dailyUsage } from '../../src/db/schema.js';
import { createEventsRuntime, type EventsRuntime } from '../../src/events/runtime.js';
import { createLogger } from '../../src/logger.js';
import { startHarness } from '../composio/harness.js';
import { buildTestApp } from '../support/app.js';
import { createTestDatabase } from '../support/database.js';
import { createTrigger, gmailBody, installationWithAccount, type TriggersWorld } from './support.js';

/** Trigger discovery (`GET /v1/triggers/types`) and test events (`POST /v1/triggers/{id}/test`), against the simulator. */

let world: TriggersWorld;
let runtime: EventsRuntime;
beforeAll(async () => {
  // The app's events runtime is kept, to see when a poll is really waiting.
  const h = await startHarness();
  const database = await createTestDatabase();
  runtime = createEventsRuntime({ database, logger: createLogger('silent') });
  const t = await buildTestApp({ REGISTRATIONS_PER_MINUTE: '100000' }, { composio: h.gateway, database, events: runtime });
  world = {
    t,
    h,
    async close() {
      await t.close();
      await database.drop();
      await h.close();
    },
  };
});
afterAll(() => world.close());

/** Requests the simulator answered since `from`, as `METHOD path`. */
const simRequestsSince = (from: number) =>
  world.h.sim.controls
    .requests()
    .slice(from)
    .map((r) => `${r.method} ${r.path}`);

describe('trigger discovery', () => {
  it("lists an app's trigger types with polled flag, 15-minute floor, config schema and a sample payload", async () => {
    const a = await installationWithAccount(world);
    const response = await world.t.app.inject({ method: 'GET', url: '/v1/triggers/types?toolkit=gmail', headers: a.auth });
    expect(response.statusCode).toBe(200);
    const body = response.json();
    expect(body.toolkit).toBe('gmail');
    expect(body.types).toHaveLength(1);
    const [gmail] = body.types;
    expect(gmail).toMatchObject({
      slug: 'GMAIL_NEW_GMAIL_MESSAGE',
      name: 'New Gmail Message Received Trigger',
      description: 'Triggers when a new message is received in Gmail.',
      polled: true,
      minimumIntervalMinutes: 15,
      configSchema: { type: 'object', properties: { interval: expect.any(Object) } },
    });
    // Gmail's query is written by the broker from the filter (a `config.query` is refused): not offered.
    expect(gmail.configSchema.properties).not.toHaveProperty('query');
    expect(Object.keys(gmail.samplePayload)).toEqual(
      expect.arrayContaining(['message_id', 'thread_id', 'message_text', 'sender', 'subject', 'attachment_list']),
    );
    expect(gmail.samplePayload.subject).toBe('sample subject');

    const slack = (await world.t.app.inject({ method: 'GET', url: '/v1/triggers/types?toolkit=slack', headers: a.auth })).json();
    expect(slack.types).toEqual([expect.objectContaining({ slug: 'SLACK_RECEIVE_MESSAGE', polled: false, minimumIntervalMinutes: null })]);
    const none = (await world.t.app.inject({ method: 'GET', url: '/v1/triggers/types?toolkit=nosuchapp', headers: a.auth })).json();
    expect(none).toEqual({ toolkit: 'nosuchapp', types: [] });
  });

  it('asks Composio once per app for ten minutes, and serves the last copy stale while Composio is down', async () => {
    const a = await installationWithAccount(world);
    const get = () => world.t.app.inject({ method: 'GET', url: '/v1/triggers/types?toolkit=github', headers: a.auth });
    const since = world.h.sim.controls.requests().length;
    const first = await get();
    expect(first.statusCode).toBe(200);
    await get();
    expect(simRequestsSince(since).filter((r) => r.includes('triggers_types'))).toHaveLength(1);

    world.t.clock.advance(11 * 60_000);
    world.h.sim.controls.injectFault({ status: 503, path: '/api/v3.1/triggers_types', durationMs: 60_000 });
    try {
      const stale = await get();
      expect(stale.statusCode).toBe(200);
      expect(stale.json()).toEqual(first.json());
      expect(Number(stale.headers.age)).toBeGreaterThanOrEqual(660);
      // Never fetched: no copy to fall back on, so Composio's failure is the answer.
      const cold = await world.t.app.inject({ method: 'GET', url: '/v1/triggers/types?toolkit=outlook', headers: a.auth });
      expect(cold.statusCode).toBe(502);
      expect(cold.json()).toEqual({ error: expect.any(String), code: 'upstream_unavailable' });
    } finally {
      world.h.sim.controls.clearFaults();
    }
  });

  it('refuses a bad toolkit with 400 and a missing token with 401', async () => {
    const a = await installationWithAccount(world);
    const bad = await world.t.app.inject({ method: 'GET', url: '/v1/triggers/types?toolkit=Not%20A%20Slug', headers: a.auth });
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toEqual({ error: expect.stringMatching(/^query\.toolkit: /), code: 'invalid_request' });
    expect((await world.t.app.inject({ method: 'GET', url: '/v1/triggers/types', headers: a.auth })).statusCode).toBe(400);
    expect((await world.t.app.inject({ method: 'GET', url: '/v1/triggers/types?toolkit=gmail' })).statusCode).toBe(401);
  });

  it('makes a create cost at most two Composio requests (the account and the upsert) once the types are cached', async () => {
    const a = await installationWithAccount(world);
    await world.t.app.inject({ method: 'GET', url: '/v1/triggers/types?toolkit=gmail', headers: a.auth });
    const since = world.h.sim.controls.requests().length;
    const created = await createTrigger(world, a, gmailBody(a.accountId, { automationId: 'auto_two_calls' }));
    expect(created.statusCode).toBe(201);
    const requests = simRequestsSince(since);
    // The account is looked up in the installation's own list (Composio's answers name no user).
    expect(requests).toEqual(['GET /api/v3.1/connected_accounts', 'POST /api/v3.1/trigger_instances/GMAIL_NEW_GMAIL_MESSAGE/upsert']);
    expect(world.h.sim.controls.requests()[since]?.query).toContain(`connected_account_ids=${a.accountId}`);
  });
});

describe('test events', () => {
  async function pollOnce(auth: { authorization: string }, wait = 0) {
    return world.t.app.inject({ method: 'GET', url: `/v1/events?wait=${wait}`, headers: auth });
  }

  it('queues one trigger.test event shaped like trigger.event, waking a waiting poll, outside the quota and without Composio', async () => {
    const a = await installationWithAccount(world);
    const trigger = (await createTrigger(world, a, gmailBody(a.accountId, { automationId: 'auto_test' }))).json();

    const waiting = pollOnce(a.auth, 10);
    // The poll is waiting (nothing was queued yet) before the test event is sent.
    await expect.poll(() => runtime.hub.size).toBe(1);
    const since = world.h.sim.controls.requests().length;
    const started = Date.now();
    const sent = await world.t.app.inject({ method: 'POST', url: `/v1/triggers/${trigger.id}/test`, headers: a.auth });
    expect(sent.statusCode).toBe(202);
    expect(sent.json()).toEqual({ eventId: expect.stringMatching(/^omb:trigger\.test:/), remainingToday: 19 });

    const answer = await waiting;
    expect(Date.now() - started).toBeLessThan(5000);
    expect(answer.statusCode).toBe(200);
    const { events } = answer.json();
    expect(events).toEqual([
      {
        id: sent.json().eventId,
        type: 'trigger.test',
        test: true,
        triggerId: trigger.id,
        automationId: 'auto_test',
        toolkit: 'gmail',
        triggerSlug: 'GMAIL_NEW_GMAIL_MESSAGE',
        connectedAccountId: a.accountId,
        receivedAt: world.t.clock.now().toISOString(),
        data: expect.objectContaining({ message_id: 'sample message_id', subject: 'sample subject' }),
      },
    ]);
    expect(simRequestsSince(since)).toEqual([]);

    const me = (await world.t.app.inject({ method: 'GET', url: '/v1/me', headers: a.auth })).json();
    expect(me.quota).toMatchObject({ keptToday: 0, skippedToday: 0 });
    const view = (await world.t.app.inject({ method: 'GET', url: `/v1/triggers/${trigger.id}`, headers: a.auth })).json();
    expect(view.today).toEqual({ kept: 0, skipped: 0, skippedReason: null });
  });

  it('stops at the daily allowance with 429 and a retry-after, and leaves the quota alone even when it is used up', async () => {
    const a = await installationWithAccount(world);
    const trigger = (await createTrigger(world, a, gmailBody(a.accountId, { automationId: 'auto_allowance' }))).json();
    // The quota itself is used up: test events do not care.
    await world.t.database.db.insert(dailyUsage).values({ installationId: a.installationId, day: utcDay(world.t.clock.now()), kept: 500 });
    const send = () => world.t.app.inject({ method: 'POST', url: `/v1/triggers/${trigger.id}/test`, headers: a.auth });
    for (let i = 0; i < 20; i += 1) expect((await send()).statusCode).toBe(202);
    const refused = await send();
    expect(refused.statusCode).toBe(429);
    expect(refused.json()).toEqual({ error: expect.stringMatching(/20 test events for today/), code: 'test_allowance_exceeded' });
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);

    const { events } = (await world.t.app.inject({ method: 'GET', url: '/v1/events?wait=0&limit=100', headers: a.auth })).json();
    expect(events).toHaveLength(20);
    const [usage] = await world.t.database.sql<{ kept: number; skipped: number; test_events: number }[]>`
      select kept, skipped, test_events from daily_usage where installation_id = ${a.installationId}`;
    expect(usage).toEqual({ kept: 500, skipped: 0, test_events: 20 });

    world.t.clock.advance(86_400_000);
    expect((await send()).statusCode).toBe(202);
  });

  it("answers 404 for another installation's trigger and for what is not a trigger id", async () => {
    const a = await installationWithAccount(world);
    const b = await installationWithAccount(world);
    const trigger = (await createTrigger(world, a, gmailBody(a.accountId, { automationId: 'auto_mine' }))).json();
    for (const url of [`/v1/triggers/${trigger.id}/test`, '/v1/triggers/not-an-id/test', `/v1/triggers/${crypto.randomUUID()}/test`]) {
      const response = await world.t.app.inject({ method: 'POST', url, headers: b.auth });
      expect(response.statusCode).toBe(404);
      expect(response.json()).toEqual({ error: 'no trigger with this id', code: 'trigger_not_found' });
    }
    expect((await pollOnce(b.auth)).json().events).toEqual([]);
    expect((await world.t.app.inject({ method: 'POST', url: `/v1/triggers/${trigger.id}/test` })).statusCode).toBe(401);
  });
});
