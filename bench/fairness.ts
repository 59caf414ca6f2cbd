import { Agent } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import postgres from 'postgres';
import { startEmbeddedPostgres } from '../src/db/embedded.js';
import { applyMigrations } from '../src/db/migrate.js';
import { composioUserIdFor } from '../src/installations/tokens.js';
import { createLogger } from '../src/logger.js';
import { startSimulator } from '../src/sim/index.js';
import { benchRun, type Child, cpuSeconds, fmt, heading, httpCall, line, percentile, startChild } from './lib.js';

/**
 * `npm run bench:fairness`: what one installation can do to another, in one run.
 *
 * 1. Composio fair share: a victim's `GET /v1/connectors/connected` p99 while N installations
 *    (N = 1, 10, 50) saturate their own allowance, beside the victim's idle p99. The budget is
 *    set so that the flooders together want far more Composio calls than it allows.
 * 2. Poll cap: another installation's `GET /v1/me` while one installation tries to hold 2,000
 *    polls and events keep waking it, beside the same figure with nobody polling.
 * 3. Check-in flood: another installation's `GET /v1/me` while 5,000 check-ins sent at once by
 *    one token are answered, beside the same figure during an equal flood of requests to a route that does
 *    no work (an unknown path): what 5,000 concurrent requests of any kind cost this machine is
 *    the floor, so the ratio says what the check-ins add. Target: within 2x.
 *
 * `--part fair-share|poll-cap|check-ins` runs one part alone.
 * One broker started as `npm start` starts it (embedded Postgres in a temporary folder, the
 * simulator and the load in this process), loopback only.
 */

const CALLS_PER_MINUTE = 6_000;
const REQUESTS_PER_MINUTE = 120;
const FLOODER_INTERVAL_MS = 60_000 / REQUESTS_PER_MINUTE;
/**
 * The victim calls now and then, as the app does: once every 2 s (2 Composio calls a request,
 * so 1 call a second — under its fair share even with 50 flooders, 100/s ÷ 51). Its p99 of 30
 * samples is their worst.
 */
const VICTIM_SAMPLES = 30;
const VICTIM_INTERVAL_MS = 2000;
/** Another installation's check-ins during the poll flood: 100, one every 100 ms. */
const ME_SAMPLES = 100;
const ME_INTERVAL_MS = 100;
const POLLERS = 2_000;
/** The check-in flood: this many requests from one token sent at once, the other installation checking in every FLOOD_SAMPLE_MS until they are answered. */
const FLOOD_REQUESTS = 5_000;
const FLOOD_SAMPLE_MS = 20;
const FLOOD_MIN_SAMPLES = 20;
const FLOOD_ROUNDS = 3;
/** Installations taking turns at the other check-ins: about 1,200 over the part, under 30 a minute each. */
const FLOOD_CHECKING_IN = 100;

const PARTS = ['fair-share', 'poll-cap', 'check-ins'] as const;
const { values: args } = parseArgs({ options: { part: { type: 'string' } } });
if (args.part !== undefined && !PARTS.includes(args.part as (typeof PARTS)[number])) {
  throw new Error(`--part must be one of ${PARTS.join(', ')}`);
}
const runs = (part: (typeof PARTS)[number]) => args.part === undefined || args.part === part;

const log = createLogger('warn');
const { dataDir, cleanups, run } = await benchRun('omb-bench-fairness-');
await run(main);

interface Who {
  installationId: string;
  auth: { authorization: string };
}

async function main(): Promise<void> {
  process.stdout.write('Setting up: embedded Postgres, migrations, the simulator, a broker…\n');
  const embedded = await startEmbeddedPostgres({ dataDir, logger: log, database: 'omb_bench_fairness' });
  cleanups.push(() => embedded.stop());
  await applyMigrations(embedded.url, log);
  const sim = await startSimulator({ apiKey: 'sim_bench_fairness', logger: false });
  cleanups.push(() => sim.close());
  const broker = await startChild('src/main.ts', {
    DATABASE_URL: embedded.url,
    COMPOSIO_API_KEY: sim.apiKey,
    COMPOSIO_BASE_URL: sim.origin,
    COMPOSIO_WEBHOOK_SECRET: 'whsec_bench_fairness',
    COMPOSIO_CALLS_PER_MINUTE: String(CALLS_PER_MINUTE),
    CONNECTOR_REQUESTS_PER_MINUTE: String(REQUESTS_PER_MINUTE),
    EVENT_REQUESTS_PER_MINUTE: '300',
    REGISTRATIONS_PER_MINUTE: '100000',
    LOG_LEVEL: 'warn',
  });
  cleanups.push(() => broker.stop());
  const agent = new Agent({ keepAlive: true, maxSockets: 4096 });
  cleanups.push(async () => agent.destroy());

  const register = async (): Promise<Who> => {
    const answer = await httpCall(agent, `${broker.url}/v1/installations`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    const { installationId, token } = JSON.parse(answer.body) as { installationId: string; token: string };
    return { installationId, auth: { authorization: `Bearer ${token}` } };
  };
  const victim = await register();
  const flooders: Who[] = [];
  for (let i = 0; i < 50; i++) flooders.push(await register());
  // Each has one connected account, so the inventory has something to list.
  for (const who of [victim, ...flooders]) {
    sim.controls.createAccount({ userId: composioUserIdFor(who.installationId), toolkit: 'github', alias: 'work', status: 'ACTIVE' });
  }
  process.stdout.write(
    `Ready: Composio budget ${CALLS_PER_MINUTE}/min, ${REQUESTS_PER_MINUTE} connected-app requests/min per installation, loopback (Node ${process.version}).\n`,
  );

  if (runs('fair-share')) await fairShare(broker, agent, sim, victim, flooders);
  if (runs('poll-cap')) await pollCap(broker, agent, embedded.url, victim);
  if (runs('check-ins')) {
    const others: Who[] = [];
    for (let i = 0; i < FLOOD_CHECKING_IN; i++) others.push(await register());
    await checkInFlood(broker, agent, others, flooders[0]!);
  }
}

/** Latencies of `samples` requests, one every `intervalMs`. */
async function victimSamples(
  call: () => Promise<number>,
  samples = VICTIM_SAMPLES,
  intervalMs = VICTIM_INTERVAL_MS,
): Promise<{ latencies: number[]; failures: number }> {
  const latencies: number[] = [];
  let failures = 0;
  for (let i = 0; i < samples; i++) {
    const t0 = performance.now();
    const status = await call().catch(() => 0);
    latencies.push(performance.now() - t0);
    if (status !== 200) failures++;
    await sleep(Math.max(0, intervalMs - (performance.now() - t0)));
  }
  return { latencies, failures };
}

function figures(sample: { latencies: number[]; failures: number }): string[] {
  return [
    `p50 ${fmt.ms(percentile(sample.latencies, 50))}`,
    `p99 ${fmt.ms(percentile(sample.latencies, 99))}`,
    ...(sample.failures > 0 ? [`(${sample.failures} not 200)`] : []),
  ];
}

async function fairShare(broker: Child, agent: Agent, sim: Awaited<ReturnType<typeof startSimulator>>, victim: Who, flooders: Who[]) {
  const connected = (who: Who) => httpCall(agent, `${broker.url}/v1/connectors/connected`, { headers: who.auth }).then((a) => a.status);
  heading(
    `Composio fair share: the victim's GET /v1/connectors/connected, ${VICTIM_SAMPLES} of them, one every ${VICTIM_INTERVAL_MS / 1000} s`,
  );
  for (let i = 0; i < 20; i++) await connected(victim);
  const idle = await victimSamples(() => connected(victim));
  line('idle (nobody else calling)', ...figures(idle));
  const idleP99 = percentile(idle.latencies, 99);

  for (const n of [1, 10, 50]) {
    let stop = false;
    let sent = 0;
    let limited = 0;
    const cpuBefore = cpuSeconds(broker);
    const phaseStarted = performance.now();
    // Each flooder sends its whole allowance, evenly: a request every 60 s / REQUESTS_PER_MINUTE,
    // without waiting for the answers (they pile up in the broker, queued for Composio).
    const pending: Array<Promise<unknown>> = [];
    const flood = flooders.slice(0, n).map(async (who) => {
      await sleep(Math.random() * FLOODER_INTERVAL_MS);
      while (!stop) {
        pending.push(
          connected(who)
            .catch(() => 0)
            .then((status) => {
              sent++;
              if (status === 429) limited++;
            }),
        );
        await sleep(FLOODER_INTERVAL_MS);
      }
    });
    await sleep(1000);
    const loaded = await victimSamples(() => connected(victim));
    // The simulator remembers its last 1,000 requests: enough for the last second's rate.
    const lastSecond = Date.now() - 1000;
    const composioPerSecond = sim.controls.requests().filter((request) => request.at >= lastSecond).length;
    const cpu = (cpuSeconds(broker) - cpuBefore) / ((performance.now() - phaseStarted) / 1000);
    stop = true;
    await Promise.all(flood);
    await Promise.all(pending);
    const ratio = percentile(loaded.latencies, 99) / idleP99;
    line(
      `${n} installation(s) saturating theirs`,
      ...figures(loaded),
      `p99 / idle p99 ${ratio.toFixed(2)}x ${ratio <= 2 ? '(within 2x)' : '(OVER 2x)'}`,
      `flood ${fmt.int(sent)} requests (${fmt.int(limited)} x 429), Composio ${fmt.rate(composioPerSecond)} at the end`,
      `broker CPU ${(cpu * 100).toFixed(0)}% of a core`,
    );
    // Let the budget refill and the counters' minute pass before the next round.
    await sleep(2_000);
  }
}

async function pollCap(broker: Child, agent: Agent, databaseUrl: string, other: Who) {
  heading(`Poll cap: another installation's GET /v1/me, ${ME_SAMPLES} of them, one every ${ME_INTERVAL_MS} ms`);
  const me = () => httpCall(agent, `${broker.url}/v1/me`, { headers: other.auth }).then((a) => a.status);
  const quiet = await victimSamples(me, ME_SAMPLES, ME_INTERVAL_MS);
  line('nobody polling', ...figures(quiet));

  const register = await httpCall(agent, `${broker.url}/v1/installations`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{}',
  });
  const holder = JSON.parse(register.body) as { installationId: string; token: string };
  const auth = { authorization: `Bearer ${holder.token}` };
  const pollAgent = new Agent({ keepAlive: true, maxSockets: POLLERS + 10 });
  let stop = false;
  let answered = 0;
  let refused = 0;
  const pollers = Array.from({ length: POLLERS }, async () => {
    while (!stop) {
      const answer = await httpCall(pollAgent, `${broker.url}/v1/events?wait=25`, { headers: auth }).catch(() => ({
        status: 0,
        headers: {} as Record<string, string | string[] | undefined>,
      }));
      // A careless client that still follows the contract: it polls again at once after an
      // answer, and waits `retry-after` after a 429.
      if (answer.status === 429) {
        refused++;
        await sleep(Number(answer.headers['retry-after'] ?? 1) * 1000);
      } else answered++;
    }
  });
  // Events for the holder keep waking its polls.
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  let n = 0;
  const waking = (async () => {
    while (!stop) {
      n++;
      await sql`select pg_notify('omb_events', ${holder.installationId})`;
      await sleep(50);
    }
  })();
  await sleep(2000);
  const busy = await victimSamples(me, ME_SAMPLES, ME_INTERVAL_MS);
  stop = true;
  pollAgent.destroy();
  await Promise.all([waking, ...pollers.map((p) => p.catch(() => undefined))]);
  await sql.end({ timeout: 1 });
  const ratio = percentile(busy.latencies, 99) / percentile(quiet.latencies, 99);
  line(`one installation trying to hold ${POLLERS} polls, woken 20/s`, ...figures(busy), `p99 ratio ${ratio.toFixed(2)}x`);
  line('its polls answered / refused (429)', `${fmt.int(answered)} / ${fmt.int(refused)}`, `${n} wake-ups`);
}

async function checkInFlood(broker: Child, agent: Agent, others: Who[], flooder: Who) {
  heading(
    `Check-in flood: other installations' GET /v1/me, one every ${FLOOD_SAMPLE_MS} ms, while ${fmt.int(FLOOD_REQUESTS)} requests sent at once are answered`,
  );
  // The other installations take turns, so none of them checks in more often than its own limit allows.
  let turn = 0;
  const me = () => httpCall(agent, `${broker.url}/v1/me`, { headers: others[turn++ % others.length]!.auth }).then((a) => a.status);

  /** The other installations' check-ins, one every FLOOD_SAMPLE_MS (each sent on time), while FLOOD_REQUESTS to `url` sent at once are answered. */
  // The flood's connections are opened once, by a first flood not measured, and kept: 5,000
  // connections opened at once overflow the listen backlog, and the retried connects would
  // measure the kernel, not the broker.
  const floodAgent = new Agent({ keepAlive: true, maxSockets: FLOOD_REQUESTS, maxFreeSockets: FLOOD_REQUESTS });
  const during = async (url: string, headers: Record<string, string>) => {
    const statuses = new Map<number, number>();
    let answered = 0;
    const flood = Array.from({ length: FLOOD_REQUESTS }, () =>
      httpCall(floodAgent, url, { headers })
        .then(
          (a) => a.status,
          () => 0,
        )
        .then((status) => {
          answered++;
          statuses.set(status, (statuses.get(status) ?? 0) + 1);
        }),
    );
    const started = performance.now();
    const timings: Array<Promise<{ ms: number; ok: boolean }>> = [];
    while (answered < FLOOD_REQUESTS || timings.length < FLOOD_MIN_SAMPLES) {
      const t0 = performance.now();
      timings.push(
        me().then(
          (status) => ({ ms: performance.now() - t0, ok: status === 200 }),
          () => ({ ms: performance.now() - t0, ok: false }),
        ),
      );
      await sleep(FLOOD_SAMPLE_MS);
    }
    await Promise.all(flood);
    const floodMs = performance.now() - started;
    const done = await Promise.all(timings);
    const byStatus = [...statuses].map(([status, n]) => `${fmt.int(n)} x ${status || 'failed'}`).join(', ');
    return { sample: { latencies: done.map((d) => d.ms), failures: done.filter((d) => !d.ok).length }, byStatus, floodMs };
  };

  const warm = await during(`${broker.url}/v1/no-such-route`, {});
  line("opening the flood's connections (not measured)", `${warm.byStatus} in ${fmt.ms(warm.floodMs)}`);
  const ratios: number[] = [];
  for (let round = 1; round <= FLOOD_ROUNDS; round++) {
    const floor = await during(`${broker.url}/v1/no-such-route`, {});
    await sleep(1000);
    const checkIns = await during(`${broker.url}/v1/me`, flooder.auth);
    await sleep(1000);
    const ratio = percentile(checkIns.sample.latencies, 99) / percentile(floor.sample.latencies, 99);
    ratios.push(ratio);
    line(`round ${round}: an unknown path (the floor)`, ...figures(floor.sample), `${floor.byStatus} in ${fmt.ms(floor.floodMs)}`);
    line(
      `round ${round}: one token's check-ins`,
      ...figures(checkIns.sample),
      `${checkIns.byStatus} in ${fmt.ms(checkIns.floodMs)}`,
      `p99 / floor p99 ${ratio.toFixed(2)}x ${ratio <= 2 ? '(within 2x)' : '(OVER 2x)'}`,
    );
  }
  floodAgent.destroy();
  process.stdout.write(`${JSON.stringify({ checkInFloodP99Ratios: ratios.map((r) => Number(r.toFixed(2))) })}\n`);
}
