import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { projectDigest, signWebhook } from '../../src/composio/index.js';
import { type Simulator, startSimulator } from '../../src/sim/index.js';
import { type BrokerProcess, startBroker } from '../support/broker-process.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { type Registered, until } from '../support/http.js';

/**
 * Two broker processes, started as `npm start` starts them, on ONE database and ONE Composio
 * project: each limit is one limit, not one per process. Requests alternate between the two.
 */

const REGISTRATIONS = 4;
const BAD_WEBHOOKS = 3;
/** A burst of 10 calls, then one a second. */
const CALLS_PER_MINUTE = 60;
const BURST = CALLS_PER_MINUTE / 6;
/**
 * Inventories sent at once, half through each process. On the installations' first use each
 * makes three to four Composio calls (a Session, its toolkits, the accounts, the catalog), so
 * each process alone asks for about its whole burst — two budgets would let out twice the burst
 * early — while the calls past the burst, paced at one a second, stay about a burst's worth.
 */
const INVENTORIES = 6;

let sim: Simulator;
let database: TestDatabase;
let a: BrokerProcess;
let b: BrokerProcess;
const registered: Registered[] = [];

beforeAll(async () => {
  sim = await startSimulator({ apiKey: 'sim_shared_limits_key', logger: false });
  database = await createTestDatabase();
  const env = {
    DATABASE_URL: database.url,
    COMPOSIO_API_KEY: sim.apiKey,
    COMPOSIO_BASE_URL: sim.origin,
    COMPOSIO_WEBHOOK_SECRET: 'whsec_shared_limits',
    COMPOSIO_CALLS_PER_MINUTE: String(CALLS_PER_MINUTE),
    COMPOSIO_TIMEOUT_MS: '12000',
    REGISTRATIONS_PER_MINUTE: String(REGISTRATIONS),
    BAD_WEBHOOKS_PER_MINUTE: String(BAD_WEBHOOKS),
    CONNECTOR_REQUESTS_PER_MINUTE: '1000',
  };
  [a, b] = await Promise.all([startBroker(env), startBroker(env)]);
}, 60_000);

afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop()]);
  await sim?.close();
  await database?.drop();
}, 60_000);

async function call(broker: BrokerProcess, method: string, path: string, init: { headers?: Record<string, string>; body?: string } = {}) {
  const response = await fetch(`${broker.url}${path}`, { method, headers: init.headers, body: init.body });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined, at: performance.now() };
}

/** The calls the shared budget would let out now (its balance refilled to this moment), or 0 during a pause. */
async function budgetNow(): Promise<number> {
  const [row] = await database.sql<{ tokens: number }[]>`
    select case when paused_until > now() then 0
                else least(${BURST}::float8, tokens + greatest(0, extract(epoch from (now() - refilled_at)) * 1000) * ${CALLS_PER_MINUTE / 60_000}::float8)
           end::float8 as tokens
      from composio_budgets where project = ${projectDigest(sim.apiKey)}`;
  return Number(row?.tokens ?? BURST);
}

const alternate = (n: number) => Array.from({ length: n }, (_, i) => (i % 2 === 0 ? a : b));

describe('two broker processes on one database share their limits', () => {
  it('count ONE registration limit per address', async () => {
    const statuses: number[] = [];
    for (const broker of alternate(2 * REGISTRATIONS)) {
      const answer = await call(broker, 'POST', '/v1/installations', { headers: { 'content-type': 'application/json' }, body: '{}' });
      statuses.push(answer.status);
      if (answer.status === 201) {
        const { installationId, token } = answer.body as { installationId: string; token: string };
        registered.push({ installationId, token, auth: { authorization: `Bearer ${token}` } });
      } else {
        expect(answer.body).toEqual({ error: 'too many registration attempts', code: 'rate_limited' });
      }
    }
    // One process alone would have let 4 through, so two would let 8.
    expect(statuses).toEqual([...Array(REGISTRATIONS).fill(201), ...Array(REGISTRATIONS).fill(429)]);
  });

  it('count ONE bad-signature limit per address', async () => {
    const body = JSON.stringify({ id: 'x', type: 'composio.trigger.message', metadata: {}, data: {} });
    const statuses: number[] = [];
    for (const [n, broker] of alternate(2 * BAD_WEBHOOKS).entries()) {
      const id = `msg_bad_${n}`;
      const timestamp = String(Math.floor(Date.now() / 1000));
      const headers = {
        'content-type': 'application/json',
        'webhook-id': id,
        'webhook-timestamp': timestamp,
        'webhook-signature': signWebhook({ id, timestamp, body, secret: 'whsec_someone_else' }),
      };
      const answer = await call(broker, 'POST', '/v1/webhooks/composio', { headers, body });
      statuses.push(answer.status);
    }
    expect(statuses).toEqual([...Array(BAD_WEBHOOKS).fill(401), ...Array(BAD_WEBHOOKS).fill(429)]);
  });

  it('spend ONE Composio budget: a burst through both is paced as one project', async () => {
    expect(registered.length).toBeGreaterThanOrEqual(2);
    sim.controls.clearRequests();
    // Many requests through both processes at once, each making at least one Composio call.
    const answers = await Promise.all(
      Array.from({ length: INVENTORIES }, (_, i) =>
        call(i % 2 === 0 ? a : b, 'GET', '/v1/connectors/connected', { headers: registered[i % 2]!.auth }),
      ),
    );
    expect(answers.every((answer) => answer.status === 200 || answer.status === 503)).toBe(true);
    const sent = sim.controls.requests();
    expect(sent.length).toBeGreaterThan(BURST);
    // Within the first 900 ms only the burst (plus at most one refilled call) may go out; two
    // budgets would have let out twice the burst.
    const first = sent[0]!.at;
    const early = sent.filter((request) => request.at - first < 900).length;
    expect(early).toBeLessThanOrEqual(BURST + 1);
  }, 60_000);

  it("pause BOTH for a 429's retry-after, whichever process received it", async () => {
    // Let the burst's reservations drain, so what follows is about the pause alone: the shared
    // budget (refilled to now) is back to two calls, with no pause in force.
    await until(async () => (await budgetNow()) >= 2, 20_000, 'the reservations drained');
    sim.controls.clearRequests();
    sim.controls.injectFault({ status: 429, retryAfter: 2, times: 1 });
    const limited = await call(a, 'GET', '/v1/connectors/connected', { headers: registered[0]!.auth });
    expect(limited.status).toBe(503);
    expect(limited.body).toMatchObject({ code: 'upstream_rate_limited' });

    const heardOf429 = Date.now();
    const after = await call(b, 'GET', '/v1/connectors/connected', { headers: registered[1]!.auth });
    expect(after.status).toBe(200);
    const sent = sim.controls.requests();
    const refused = sent.find((request) => request.status === 429);
    expect(refused).toBeDefined();
    // The inventory's calls go out together: those sent beside the refused one (within moments of
    // it) left before the 429 was known, and say nothing of the pause. Every other call, from
    // either process, waited until the pause was over.
    const later = sent.filter((request) => request.at >= heardOf429);
    expect(later.length).toBeGreaterThan(0);
    for (const request of later) expect(request.at - refused!.at).toBeGreaterThanOrEqual(1_900);
    for (const request of sent) {
      const after = request.at - refused!.at;
      expect(after < 500 || after >= 1_900, `a call ${after} ms after the 429`).toBe(true);
    }
  }, 60_000);
});
