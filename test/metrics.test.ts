import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { composioCallRecorder, createMetrics } from '../src/metrics/metrics.js';
import { startMetricsServer } from '../src/metrics/routes.js';
import { type Harness, startHarness } from './composio/harness.js';
import { insertTrigger, SECRET, signed, triggerMessage } from './events/helpers.js';
import { buildTestApp, register, type TestApp } from './support/app.js';

const METRICS_TOKEN = 'metrics-secret-for-tests-0123456789';

let h: Harness;
let t: TestApp;
beforeAll(async () => {
  const metrics = createMetrics({ defaultMetrics: false });
  h = await startHarness({ onCall: composioCallRecorder(metrics) });
  t = await buildTestApp(
    { METRICS_TOKEN, CONNECTOR_REQUESTS_PER_MINUTE: '1000', COMPOSIO_WEBHOOK_SECRET: SECRET },
    { composio: h.gateway, metrics },
  );
});
afterAll(async () => {
  await t.close();
  await h.close();
});

const scrape = (authorization?: string) =>
  t.app.inject({ method: 'GET', url: '/metrics', headers: authorization ? { authorization } : {} });

describe('/metrics on the public address', () => {
  it('is refused without the metrics token, and with an installation token', async () => {
    expect((await scrape()).statusCode).toBe(401);
    expect((await scrape('Bearer wrong')).statusCode).toBe(401);
    const { auth } = await register(t.app);
    expect((await scrape(auth.authorization)).statusCode).toBe(401);
  });

  it('is not served at all when no token is configured', async () => {
    const plain = await buildTestApp({}, { database: t.database });
    try {
      const response = await plain.app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
      expect(response.statusCode).toBe(403);
      expect(response.json().code).toBe('metrics_disabled');
    } finally {
      await plain.close();
    }
  });

  it('reports requests by route and status, Composio calls, long-polls and the queue', async () => {
    const { auth } = await register(t.app);
    await t.app.inject({ method: 'GET', url: '/v1/me', headers: auth });
    await t.app.inject({ method: 'GET', url: '/v1/connectors/connected', headers: auth });
    await t.app.inject({ method: 'POST', url: '/v1/webhooks/composio', payload: '{}', headers: { 'content-type': 'application/json' } });

    const response = await scrape(`Bearer ${METRICS_TOKEN}`);
    expect(response.statusCode).toBe(200);
    expect(response.headers['content-type']).toMatch(/^text\/plain/);
    const text = response.body;
    expect(text).toMatch(/omb_http_request_duration_seconds_count\{method="GET",route="\/v1\/me",status="200"\} 1/);
    expect(text).toMatch(/omb_composio_calls_total\{operation="[a-zA-Z.]+",outcome="ok"\} \d+/);
    expect(text).toMatch(/omb_composio_call_duration_seconds_bucket\{le="[0-9.]+",operation=/);
    expect(text).toMatch(/omb_webhooks_total\{outcome="bad_signature"\} 1/);
    expect(text).toMatch(/^omb_long_polls_waiting 0$/m);
    expect(text).toMatch(/^omb_queue_depth 0$/m);
    expect(text).toMatch(/^omb_oldest_unacknowledged_event_age_seconds 0$/m);
    expect(text).not.toContain(METRICS_TOKEN);
  });

  it('counts queue depth and the oldest unacknowledged event from the database', async () => {
    const { installationId } = await register(t.app);
    await t.database.sql`
      update installations set last_event_position = 2 where id = ${installationId}`;
    await t.database.sql`
      insert into events (installation_id, position, id, type, received_at, data) values
        (${installationId}, 1, ${`msg_depth_1_${installationId}`}, 'trigger.event', now() - interval '90 seconds', '{}'),
        (${installationId}, 2, ${`msg_depth_2_${installationId}`}, 'trigger.event', now(), '{}')`;
    const text = (await scrape(`Bearer ${METRICS_TOKEN}`)).body;
    expect(Number(/^omb_queue_depth (\d+)$/m.exec(text)?.[1])).toBe(2);
    expect(Number(/^omb_oldest_unacknowledged_event_age_seconds ([0-9.]+)$/m.exec(text)?.[1])).toBeGreaterThanOrEqual(89);
  });

  it('counts events queued by type and events delivered to polls', async () => {
    const { installationId, auth } = await register(t.app);
    const trigger = await insertTrigger(t.database, installationId);
    for (let i = 0; i < 3; i += 1) {
      const webhook = signed(triggerMessage(trigger, { n: i }));
      const response = await t.app.inject({
        method: 'POST',
        url: '/v1/webhooks/composio',
        payload: webhook.body,
        headers: webhook.headers,
      });
      expect(response.statusCode).toBe(200);
    }
    const poll = await t.app.inject({ method: 'GET', url: '/v1/events?wait=0', headers: auth });
    expect(poll.json().events).toHaveLength(3);
    const text = (await scrape(`Bearer ${METRICS_TOKEN}`)).body;
    expect(text).toMatch(/omb_events_queued_total\{type="trigger.event"\} 3/);
    expect(text).toMatch(/^omb_events_delivered_total 3$/m);
    expect(text).toMatch(/omb_webhooks_total\{outcome="accepted"\} 3/);
  });
});

describe('/metrics on its own address', () => {
  it('refuses a METRICS_PORT another process holds, naming it', async () => {
    const serve = (port: number) =>
      startMetricsServer({
        host: '127.0.0.1',
        port,
        sql: t.database.sql,
        db: t.database.db,
        metrics: createMetrics(),
        sources: { longPollsWaiting: () => 0, knownInstallations: () => 0 },
      });
    const taken = await serve(0);
    try {
      const port = new URL(taken.listeningOrigin).port;
      await expect(serve(Number(port))).rejects.toThrow(
        `METRICS_PORT ${port} on METRICS_HOST 127.0.0.1 is in use by another process; set METRICS_PORT to a free port`,
      );
    } finally {
      await taken.close();
    }
  });

  it('serves the figures without a token on the private listener', async () => {
    const metrics = createMetrics();
    const server = await startMetricsServer({
      host: '127.0.0.1',
      port: 0,
      sql: t.database.sql,
      db: t.database.db,
      metrics,
      sources: { longPollsWaiting: () => 3, knownInstallations: () => 7 },
    });
    try {
      const address = server.server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      const response = await fetch(`http://127.0.0.1:${port}/metrics`);
      expect(response.status).toBe(200);
      const text = await response.text();
      expect(text).toMatch(/^omb_long_polls_waiting 3$/m);
      expect(text).toMatch(/^omb_known_installations 7$/m);
      expect(text).toContain('omb_process_cpu_user_seconds_total');
    } finally {
      await server.close();
    }
  });
});
