import { existsSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Simulator, startSimulator } from '../../src/sim/index.js';
import { type BrokerProcess, startBroker } from '../support/broker-process.js';
import { type DataFolders, prepareDataFolders } from '../support/data-folder.js';
import { metricValue, type Registered, rawRequest, registerOver, until } from '../support/http.js';

/**
 * SIGTERM to a broker started as `npm start` starts it, without DATABASE_URL (so on its
 * embedded Postgres), against a Composio simulator in this process: waiting polls are answered
 * at once, new connections are refused, an in-flight request finishes within SHUTDOWN_GRACE_MS
 * (and one that would not is cut off at the deadline), the database and the embedded Postgres
 * are closed, and the process exits 0. The other signals a process manager may send: SIGHUP is
 * logged and ignored, SIGQUIT and SIGUSR2 stop as SIGTERM does (docs/operating.md, "Stopping").
 *
 * Each test's broker is started with the file, all at once, each on a data folder of its own
 * (a copy of one initialised once, see data-folder.ts) and against a simulator of its own, so
 * that a broker waiting for its test neither answers nor makes another test's requests.
 */

const METRICS_TOKEN = 'metrics-token-for-shutdown-tests';
const ACCOUNTS_PATH = '/api/v3.1/connected_accounts';

/** A test's broker, its data folder and the simulator it takes for Composio. */
interface Started {
  broker: BrokerProcess;
  dataDir: string;
  sim: Simulator;
}

let folders: DataFolders;
const cleanups: Array<() => Promise<unknown>> = [];
let started: Record<'inFlight' | 'cutOff' | 'otherSignals', Promise<Started>>;

beforeAll(async () => {
  folders = await prepareDataFolders('omb-shutdown-');
  started = {
    inFlight: start({ SHUTDOWN_GRACE_MS: '8000' }),
    cutOff: start({ SHUTDOWN_GRACE_MS: '1000' }),
    // One broker for every signal: debug shows the repeated stop signal being let go.
    otherSignals: start({ SHUTDOWN_GRACE_MS: '8000', LOG_LEVEL: 'debug' }),
  };
  // Awaited by their tests; this only keeps a failure before then from counting as unhandled.
  for (const starting of Object.values(started)) starting.catch(() => undefined);
}, 60_000);
afterAll(async () => {
  await Promise.all(Object.values(started ?? {}).map((starting) => starting.catch(() => undefined)));
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
  await folders?.remove();
}, 60_000);

async function start(env: Record<string, string>): Promise<Started> {
  const [sim, dataDir] = await Promise.all([startSimulator({ apiKey: 'sim_shutdown_key', logger: false }), folders.copy()]);
  cleanups.push(() => sim.close());
  const broker = await startBroker({
    DATA_DIR: dataDir,
    COMPOSIO_API_KEY: sim.apiKey,
    COMPOSIO_BASE_URL: sim.origin,
    COMPOSIO_WEBHOOK_SECRET: 'whsec_shutdown_tests',
    METRICS_TOKEN,
    ...env,
  });
  cleanups.push(() => broker.stop('SIGKILL'));
  return { broker, dataDir, sim };
}

async function pollsWaiting(url: string): Promise<number> {
  const response = await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
  return metricValue(await response.text(), 'omb_long_polls_waiting') ?? -1;
}

/** Resolves with when (performance.now()) and how the broker process exited. */
function exitOf(broker: BrokerProcess): Promise<{ code: number | null; at: number }> {
  return new Promise((resolve) => {
    if (broker.child.exitCode !== null) resolve({ code: broker.child.exitCode, at: performance.now() });
    else broker.child.once('exit', (code) => resolve({ code, at: performance.now() }));
  });
}

/** A request and when its answer (or failure) arrived. */
async function timed<T>(work: Promise<T>): Promise<{ value?: T; error?: unknown; at: number }> {
  try {
    const value = await work;
    return { value, at: performance.now() };
  } catch (error) {
    return { error, at: performance.now() };
  }
}

async function slowRequestArrived(sim: Simulator, since: number): Promise<boolean> {
  return sim.controls
    .requests()
    .slice(since)
    .some((r) => r.method === 'GET' && r.path === ACCOUNTS_PATH);
}

const postmasterPid = (dataDir: string) => path.join(dataDir, 'postgres', 'postmaster.pid');

describe('SIGTERM', () => {
  it('answers waiting polls at once, finishes the in-flight request, closes Postgres and exits 0', async () => {
    const { broker, dataDir, sim } = await started.inFlight;
    const exited = exitOf(broker);
    const [first, second] = await Promise.all([registerOver(broker.url), registerOver(broker.url)]);
    const poll = (who: Registered) =>
      timed(
        fetch(`${broker.url}/v1/events?wait=25`, { headers: who.auth }).then(async (r) => ({
          status: r.status,
          connection: r.headers.get('connection'),
          body: (await r.json()) as { events: unknown[]; cursor: string },
        })),
      );
    const polls = [poll(first), poll(first), poll(second)];
    await until(async () => (await pollsWaiting(broker.url)) === 3, 10_000, 'three polls waiting');

    // Composio answers the inventory's account listing after 1.5 s: well inside the grace period.
    const since = sim.controls.requests().length;
    sim.controls.injectFault({ delayMs: 1500, path: ACCOUNTS_PATH, method: 'GET', times: 1 });
    const slowStarted = performance.now();
    const slow = timed(
      fetch(`${broker.url}/v1/connectors/connected`, { headers: first.auth }).then(async (r) => ({
        status: r.status,
        body: await r.json(),
      })),
    );
    await until(() => slowRequestArrived(sim, since), 10_000, 'the slow Composio call under way');

    const signalledAt = performance.now();
    broker.child.kill('SIGTERM');

    const answered = await Promise.all(polls);
    for (const answer of answered) {
      expect(answer.error).toBeUndefined();
      expect(answer.value!.status).toBe(200);
      expect(answer.value!.body).toEqual({ events: [], cursor: expect.any(String) });
      // Told to reconnect elsewhere: this connection is not kept.
      expect(answer.value!.connection).toBe('close');
      expect(answer.at - signalledAt).toBeLessThan(1000);
    }

    // No longer accepting: a new connection is refused, or reset when it reached the kernel's
    // queue just as the listening socket closed (or, if it slips in, answered 503).
    const late = await timed(rawRequest(`${broker.url}/health`));
    if (late.value) expect(late.value.status).toBe(503);
    else expect(['ECONNREFUSED', 'ECONNRESET']).toContain(String((late.error as NodeJS.ErrnoException).code));

    const finished = await slow;
    expect(finished.error).toBeUndefined();
    expect(finished.value).toMatchObject({ status: 200, body: { configured: true, services: expect.any(Object) } });
    expect(finished.at - slowStarted).toBeGreaterThanOrEqual(1400);
    // The polls did not wait for the slow request.
    for (const answer of answered) expect(answer.at).toBeLessThan(finished.at);

    const exit = await exited;
    expect(exit.code).toBe(0);
    expect(exit.at).toBeGreaterThanOrEqual(finished.at);
    expect(exit.at - signalledAt).toBeLessThan(8000);
    expect(existsSync(postmasterPid(dataDir)), 'embedded Postgres stopped').toBe(false);
    expect(broker.output()).toContain('"msg":"embedded Postgres stopped"');
  }, 60_000);

  it('cuts off a request still running at the SHUTDOWN_GRACE_MS deadline and still closes Postgres', async () => {
    const { broker, dataDir, sim } = await started.cutOff;
    const exited = exitOf(broker);
    const who = await registerOver(broker.url);

    const since = sim.controls.requests().length;
    // Longer than the grace period (the simulator's close ends it in any case).
    sim.controls.injectFault({ delayMs: 30_000, path: ACCOUNTS_PATH, method: 'GET', times: 1 });
    const slow = timed(fetch(`${broker.url}/v1/connectors/connected`, { headers: who.auth }));
    await until(() => slowRequestArrived(sim, since), 10_000, 'the slow Composio call under way');

    const signalledAt = performance.now();
    broker.child.kill('SIGTERM');

    // Cut off at the deadline, not before, and not answered.
    const cut = await slow;
    expect(cut.value, 'no answer after the deadline').toBeUndefined();
    expect(cut.at - signalledAt).toBeGreaterThanOrEqual(900);
    expect(cut.at - signalledAt).toBeLessThan(4000);

    const exit = await exited;
    expect(exit.code).toBe(0);
    expect(exit.at - signalledAt).toBeLessThan(8000);
    expect(existsSync(postmasterPid(dataDir)), 'embedded Postgres stopped').toBe(false);
    expect(broker.output()).toContain('"msg":"embedded Postgres stopped"');
    expect(broker.output()).toContain('requests still running at the end of SHUTDOWN_GRACE_MS');
    sim.controls.clearFaults();
  }, 60_000);
});

describe('the other signals', () => {
  it('SIGHUP is logged and changes nothing; SIGUSR2 stops as SIGTERM does, and a SIGQUIT right after is the same stop', async () => {
    const { broker, dataDir } = await started.otherSignals;
    const exited = exitOf(broker);
    const who = await registerOver(broker.url);
    const poll = timed(
      fetch(`${broker.url}/v1/events?wait=25`, { headers: who.auth }).then(async (r) => ({
        status: r.status,
        connection: r.headers.get('connection'),
        body: await r.json(),
      })),
    );
    await until(async () => (await pollsWaiting(broker.url)) === 1, 10_000, 'the poll waiting');

    // A reload request: said in the log, and the broker goes on serving (its poll still waits).
    broker.child.kill('SIGHUP');
    await until(() => /"signal":"SIGHUP"[^\n]*"msg":"SIGHUP ignored/.test(broker.output()), 10_000, 'SIGHUP logged');
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(broker.child.exitCode).toBeNull();
    expect((await fetch(`${broker.url}/health`)).status).toBe(200);
    expect(await pollsWaiting(broker.url)).toBe(1);

    // nodemon's restart signal stops it gracefully; a different stop signal right after is a repeat, not a second request.
    const signalledAt = performance.now();
    broker.child.kill('SIGUSR2');
    const answered = await poll;
    expect(answered.value).toEqual({ status: 200, connection: 'close', body: { events: [], cursor: expect.any(String) } });
    expect(answered.at - signalledAt).toBeLessThan(1000);
    broker.child.kill('SIGQUIT');

    const exit = await exited;
    expect(exit.code).toBe(0);
    expect(broker.output()).toMatch(/"signal":"SIGUSR2"[^\n]*"msg":"shutting down"/);
    expect(broker.output()).toMatch(/"signal":"SIGQUIT"[^\n]*"msg":"stop signal repeated; already shutting down"/);
    expect(existsSync(postmasterPid(dataDir)), 'embedded Postgres stopped').toBe(false);
  }, 60_000);
});
