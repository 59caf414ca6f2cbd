import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { composioUserIdFor } from '../../src/installations/tokens.js';
import type { FaultSpec } from '../../src/sim/index.js';
import { connectAccount, type Harness, startHarness } from '../composio/harness.js';
import { insertTrigger, SECRET, signed, type TestTrigger, triggerMessage } from '../events/helpers.js';
import { buildTestApp, register, type TestApp } from '../support/app.js';
import { metricValue, until } from '../support/http.js';

/**
 * Composio down (503s, reset connections, the simulator gone) and slow (answers later than the
 * gateway's timeout): the connected-app routes answer 502/503 with a readable `{error, code}`
 * within a bounded time, while webhooks and event polls — which never call Composio — carry on.
 */

const TIMEOUT_MS = 1000;
const METRICS_TOKEN = 'metrics-token-composio-down';
/** Beyond the gateway timeout: scheduling, the database, the response. */
const MARGIN_MS = 1000;

let h: Harness;
let t: TestApp;
/** Registered, with a stored Session and an ACTIVE Gmail account, made while Composio was up. */
let ready: { auth: { authorization: string }; accountId: string };
/** Waits for app events; its trigger is stored directly (trigger CRUD is not under test). */
let listener: { auth: { authorization: string }; trigger: TestTrigger };

beforeAll(async () => {
  // The gateway's timeout, as COMPOSIO_TIMEOUT_MS sets it in a broker process.
  h = await startHarness({ timeoutMs: TIMEOUT_MS });
  t = await buildTestApp(
    {
      COMPOSIO_WEBHOOK_SECRET: SECRET,
      METRICS_TOKEN,
      CONNECTOR_REQUESTS_PER_MINUTE: '100000',
      REGISTRATIONS_PER_MINUTE: '100000',
      // MCP's own deadline for an answer to start (minutes by default, for slow tools), set to
      // the gateway's here so a slow Composio is seen within the test.
      MCP_TIMEOUT_MS: String(TIMEOUT_MS),
    },
    { composio: h.gateway },
  );

  const a = await register(t.app);
  const { accountId } = await connectAccount(h, composioUserIdFor(a.installationId), 'gmail', 'work');
  ready = { auth: a.auth, accountId };
  const inventory = await t.app.inject({ method: 'GET', url: '/v1/connectors/connected', headers: a.auth });
  expect(inventory.statusCode).toBe(200);
  expect(inventory.json().services.gmail.connected).toBe(true);

  const l = await register(t.app);
  listener = { auth: l.auth, trigger: await insertTrigger(t.database, l.installationId) };
});
afterAll(async () => {
  await t?.close();
  await h?.close().catch(() => undefined);
});

let automations = 0;

type Outage = 'status' | 'reset' | 'slow' | 'gone';
type Send = (fresh: { authorization: string }) => Promise<{ statusCode: number; body: string; json(): any }>;
const ALL: Outage[] = ['status', 'reset', 'slow', 'gone'];

const mcpCall = (auth: { authorization: string }) =>
  t.app.inject({
    method: 'POST',
    url: '/v1/mcp',
    headers: { ...auth, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    payload: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
  });

/**
 * The connected-app requests a client makes, and the outages each is checked under; `fresh` is
 * an installation with no Session yet. An MCP request on a known Session goes straight to the
 * MCP endpoint: it gives up when Composio does not start answering in time, while an answer
 * that has started may stream for minutes (a tool call).
 */
const routes: Array<{ name: string; send: Send; under: Outage[] }> = [
  {
    name: 'GET /v1/connectors/connected',
    under: ALL,
    send: () => t.app.inject({ method: 'GET', url: '/v1/connectors/connected', headers: ready.auth }),
  },
  {
    name: 'GET /v1/connectors?services=',
    under: ALL,
    send: () => t.app.inject({ method: 'GET', url: '/v1/connectors?services=gmail,slack', headers: ready.auth }),
  },
  {
    name: 'POST /v1/connectors/slack/authorize',
    under: ALL,
    send: () => t.app.inject({ method: 'POST', url: '/v1/connectors/slack/authorize', headers: ready.auth, payload: {} }),
  },
  { name: 'POST /v1/mcp (first use: makes the Session)', under: ALL, send: (fresh) => mcpCall(fresh) },
  { name: 'POST /v1/mcp (Session known)', under: ['reset', 'slow', 'gone'], send: () => mcpCall(ready.auth) },
  {
    name: 'POST /v1/triggers',
    under: ALL,
    send: () =>
      t.app.inject({
        method: 'POST',
        url: '/v1/triggers',
        headers: ready.auth,
        payload: {
          automationId: `auto_down_${++automations}`,
          toolkit: 'gmail',
          triggerSlug: 'GMAIL_NEW_GMAIL_MESSAGE',
          connectedAccountId: ready.accountId,
        },
      }),
  },
];

/** Every connected-app route at once; each must fail readably and in time. */
async function expectConnectedAppsFail(outage: Outage, boundMs: number): Promise<void> {
  const fresh = (await register(t.app)).auth;
  const results = await Promise.all(
    routes
      .filter((route) => route.under.includes(outage))
      .map(async ({ name, send }) => {
        const started = performance.now();
        const response = await send(fresh);
        return { name, response, ms: performance.now() - started };
      }),
  );
  for (const { name, response, ms } of results) expectReadableFailure(name, response, ms, boundMs);
}

function expectReadableFailure(
  name: string,
  response: { statusCode: number; body: string; json(): any },
  ms: number,
  boundMs: number,
): void {
  expect([502, 503], `${name}: ${response.statusCode} ${response.body}`).toContain(response.statusCode);
  const body = response.json();
  expect(body, name).toEqual({ error: expect.any(String), code: expect.stringMatching(/^[a-z]+(_[a-z]+)*$/) });
  // One readable sentence naming Composio, nothing technical.
  expect(body.error, name).toMatch(/^Composio.*[.!]$/);
  expect(body.error, name).not.toMatch(/ECONN|socket|fetch failed|undefined|\bat \w+ \(/i);
  expect(ms, `${name} answered in ${Math.round(ms)} ms`).toBeLessThan(boundMs);
}

/**
 * Meanwhile a webhook is accepted fast (faster than any Composio call can answer when it is slow,
 * and with Composio gone) and wakes the installation's waiting poll.
 */
async function expectEventsUnaffected(): Promise<void> {
  const poll = t.app.inject({ method: 'GET', url: '/v1/events?wait=10', headers: listener.auth });
  await until(async () => (await pollsWaiting()) === 1, 5000, 'the poll waiting');
  const webhook = signed(triggerMessage(listener.trigger, { during: 'outage' }), { at: t.clock.now() });
  const started = performance.now();
  const accepted = await t.app.inject({ method: 'POST', url: '/v1/webhooks/composio', headers: webhook.headers, payload: webhook.body });
  const webhookMs = performance.now() - started;
  expect(accepted.statusCode).toBe(200);
  expect(accepted.json()).toEqual({ outcome: 'accepted' });
  expect(webhookMs).toBeLessThan(500);

  const answer = await poll;
  expect(answer.statusCode).toBe(200);
  const { events, cursor } = answer.json<{ events: Array<{ id: string }>; cursor: string }>();
  expect(events.map((e) => e.id)).toEqual([webhook.id]);
  expect(performance.now() - started).toBeLessThan(1000);
  const ack = await t.app.inject({ method: 'POST', url: '/v1/events/ack', headers: listener.auth, payload: { cursor } });
  expect(ack.statusCode).toBe(204);
}

async function pollsWaiting(): Promise<number | undefined> {
  const response = await t.app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
  return metricValue(response.body, 'omb_long_polls_waiting');
}

/** Composio answers every call with this fault until the test clears it. */
function composioFails(spec: FaultSpec): void {
  h.sim.controls.clearFaults();
  h.sim.controls.injectFault({ ...spec, durationMs: 60_000 });
}

describe('Composio down', () => {
  it.each([
    ['answers 503 to everything', { status: 503 }],
    ['answers 500 to everything', { status: 500 }],
    ['resets every connection', { reset: true }],
  ] satisfies Array<[string, FaultSpec]>)('%s: connected-app routes fail readably and fast; events carry on', async (_name, fault) => {
    composioFails(fault);
    try {
      await Promise.all([expectConnectedAppsFail('reset' in fault ? 'reset' : 'status', MARGIN_MS), expectEventsUnaffected()]);
    } finally {
      h.sim.controls.clearFaults();
    }
  });
});

describe('Composio’s MCP endpoint down, on a known Session', () => {
  it.each([[{ status: 503 }], [{ status: 500 }], [{ status: 429, retryAfter: 0 }]] satisfies Array<[FaultSpec]>)(
    'answering %j: /v1/mcp fails readably',
    async (fault) => {
      composioFails(fault);
      try {
        const started = performance.now();
        const response = await mcpCall(ready.auth);
        expectReadableFailure('POST /v1/mcp (Session known)', response, performance.now() - started, MARGIN_MS);
      } finally {
        h.sim.controls.clearFaults();
      }
    },
  );
});

describe('Composio slow', () => {
  it('answering later than the gateway timeout: connected-app routes give up in time; events carry on', async () => {
    composioFails({ delayMs: TIMEOUT_MS * 4 });
    try {
      await Promise.all([expectConnectedAppsFail('slow', TIMEOUT_MS + MARGIN_MS), expectEventsUnaffected()]);
    } finally {
      h.sim.controls.clearFaults();
    }
  });
});

describe('Composio unreachable', () => {
  it('with the simulator gone: connected-app routes fail readably and fast; events carry on', async () => {
    await h.close();
    await Promise.all([expectConnectedAppsFail('gone', MARGIN_MS), expectEventsUnaffected()]);
  });
});
