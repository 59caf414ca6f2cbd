import { randomBytes, randomInt } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import postgres from 'postgres';
import { APPLICATION_NAMES } from '../src/db/database.js';
import { composioUserIdFor } from '../src/installations/tokens.js';
import { createLogger } from '../src/logger.js';
import { type Simulator, startSimulator } from '../src/sim/index.js';
import { type BrokerProcess, startBroker } from '../test/support/broker-process.js';
import { registerOver } from '../test/support/http.js';
import { benchRun, percentile, rounded, rssKiB } from './lib.js';
import { embeddedDatabase, pgBouncerInFront, replicatedDatabase, type SoakDatabase, type SoakPooler } from './soak-database.js';
import { type Brokers, Consumers, Ledger, type SoakInstallation, seededRandom, sideTraffic, WebhookSender } from './soak-traffic.js';

/**
 * `npm run soak -- --minutes N [--standby] [--pooled] [--seed S]`: the broker under a steady, ordinary load
 * for N minutes (default 10), with faults on a schedule, checking that every webhook a broker
 * answered 2xx reaches its installation's app exactly once and in order.
 *
 * - Postgres: one embedded server (restarted once mid-run), or with `--standby` a primary and a
 *   synchronous standby (failed over once mid-run).
 * - With `--pooled`, PgBouncer in transaction mode between the brokers and Postgres (either kind),
 *   its server pool smaller than the brokers' pools together: `DATABASE_URL` is the bouncer,
 *   `DATABASE_DIRECT_URL` Postgres itself (LISTEN, session locks, migrations). The bouncer is
 *   killed (`kill -9`) and started again once, besides the database's own fault.
 * - Composio: the simulator sandbox mode runs, in this process; both brokers use it. It answers
 *   5xx, then 429 with `retry-after`, then slowly, each for a while.
 * - Two brokers started as `npm start` starts them, on that database.
 * - About 20 signed webhooks a second over 20 installations, to either broker; some posted to
 *   both at once, some delivered again seconds later under the same id, every refusal retried
 *   after a back-off, as Composio does.
 * - One app per installation long-polling `/v1/events` with its cursor, on either broker, some
 *   polls hung up on mid-wait; check-ins, connector listings and health checks beside.
 *
 * A line on stderr every 30 s; the last line on stdout is one JSON object (see `report`). The
 * exit code is 1 when an accepted event was lost, delivered twice or out of order (or another
 * broken promise, listed in `failures`).
 */

const { values: args } = parseArgs({
  options: {
    minutes: { type: 'string', default: '10' },
    standby: { type: 'boolean', default: false },
    pooled: { type: 'boolean', default: false },
    seed: { type: 'string' },
  },
});
const MINUTES = Number(args.minutes);
if (!(MINUTES > 0 && MINUTES <= 24 * 60)) throw new Error('--minutes must be a number of minutes above 0 (at most a day)');
const SEED = args.seed === undefined ? randomInt(2 ** 31) : Number(args.seed);
if (!Number.isInteger(SEED)) throw new Error('--seed must be a whole number');

const INSTALLATIONS = 20;
const WEBHOOKS_PER_SECOND = 20;
const SIDE_REQUESTS_PER_SECOND = 4;
const RACING_SHARE = 0.05;
const REDELIVERY_SHARE = 0.1;
const REDELIVERY_DELAY_MS = [200, 8_000] as const;
const HANG_UP_SHARE = 0.08;
/** How long Postgres stays away in its fault. */
const DATABASE_OUTAGE_MS = 4_000;
/** After the run: how long refused events keep being retried, then how long the apps may take to receive the rest. */
const RETRY_DRAIN_MS = 60_000;
const DELIVERY_DRAIN_MS = 60_000;
/** After the last event arrived, the apps keep polling this long: a repeat would show. */
const QUIET_MS = 3_000;
const SAMPLE_EVERY_MS = 5_000;
const PROGRESS_EVERY_MS = 30_000;
const POOL_SIZE = 12;
/** With `--pooled`: the bouncer's server connections, fewer than the brokers' two pools together (2 × 12, and a health connection each). */
const SERVER_POOL_SIZE = 10;
/**
 * Connections each broker holds, or may open, to Postgres itself whatever DATABASE_URL is: its
 * LISTEN connection and up to two for session locks (src/db/database.ts, docs/operating.md "Behind a pooler").
 */
const DIRECT_CONNECTIONS_PER_BROKER = 3;
const SECRET = `whsec_soak_${randomBytes(12).toString('hex')}`;
const METRICS_TOKEN = randomBytes(16).toString('hex');

const RUN_MS = MINUTES * 60_000;
/** Each Composio fault lasts this long: long enough to be felt, short beside the run. */
const COMPOSIO_FAULT_MS = Math.round(Math.min(45_000, Math.max(5_000, RUN_MS * 0.06)));

/**
 * The broker's log lines that speak of something it did not expect: an `unexpected error` (what
 * a 500 is answered for), a request answered 500, a fatal line. A 503 is logged at error level
 * too, and expected during a fault.
 */
const UNEXPECTED = /^\{"level":60,|"msg":"unexpected error"|"status":500[,}]/;

const log = createLogger('warn', pino.destination(2));
const say = (text: string) => process.stderr.write(`${text}\n`);

interface Sample {
  at: number;
  rssMb: number[];
  /**
   * Postgres's client connections, the soak's own left out: `total` all of them; `brokers` those
   * of the brokers' pools (by their application_name; with `--pooled`, the bouncer's server
   * connections, which carry the name of whichever client was linked last, so counted as all but
   * the direct ones); `direct` the LISTEN and session-lock connections (to Postgres itself).
   */
  connections?: { total: number; brokers: number; direct: number };
}

interface FaultRecord {
  fault: string;
  atS: number;
  forS?: number;
  [figure: string]: unknown;
}

const { dataDir, cleanups, run } = await benchRun('omb-soak-');
// A failure in one of the clients' loops must still stop the brokers and Postgres: the signal
// runs the bench's clean-ups (bench/lib.ts) before leaving.
for (const event of ['uncaughtException', 'unhandledRejection'] as const) {
  process.once(event, (error) => {
    say(`soak: failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    process.kill(process.pid, 'SIGTERM');
  });
}
let report: Record<string, unknown> | undefined;
await run(main, { sayHowLong: false });
if (report) {
  const failures = report.failures as string[];
  process.stdout.write(`${JSON.stringify(report)}\n`, () => process.exit(failures.length > 0 ? 1 : 0));
}

async function main(): Promise<void> {
  say(
    `soak: ${MINUTES} min, seed ${SEED}${args.standby ? ', with a standby' : ''}${args.pooled ? ', through PgBouncer' : ''}; setting up…`,
  );
  const database: SoakDatabase = args.standby ? await replicatedDatabase(log) : await embeddedDatabase(dataDir, log);
  cleanups.push(() => database.stop());
  const pooler = args.pooled ? await pgBouncerInFront(database, SERVER_POOL_SIZE) : undefined;
  if (pooler) cleanups.push(() => pooler.stop());
  const sim = await startSimulator({ apiKey: `sim_soak_${randomBytes(12).toString('hex')}`, logger: false });
  cleanups.push(() => sim.close());

  const env = {
    DATABASE_URL: pooler?.url ?? database.url,
    ...(pooler ? { DATABASE_DIRECT_URL: database.url } : {}),
    DATABASE_POOL_SIZE: String(POOL_SIZE),
    COMPOSIO_API_KEY: sim.apiKey,
    COMPOSIO_BASE_URL: sim.origin,
    COMPOSIO_WEBHOOK_SECRET: SECRET,
    METRICS_TOKEN,
    REGISTRATIONS_PER_MINUTE: '1000',
    // The soak's events are a day's worth for no plan: the quota is not what it measures.
    QUOTA_STANDARD: '10000000',
    QUOTA_PAID: '10000000',
  };
  const brokerExits: string[] = [];
  const brokerErrors: Array<{ broker: string; errors: { count: number; first: string[] } }> = [];
  let stoppingBrokers = false;
  const brokers: BrokerProcess[] = [];
  for (const name of ['A', 'B']) {
    const broker = await startBroker(env, { timeoutMs: 90_000 });
    brokers.push(broker);
    const { tail, errors } = keepTail(broker);
    brokerErrors.push({ broker: name, errors });
    cleanups.push(async () => {
      stoppingBrokers = true;
      await broker.stop();
    });
    broker.child.once('exit', (code, signal) => {
      if (stoppingBrokers) return;
      brokerExits.push(`broker ${name} exited (${signal ?? code})`);
      say(`soak: broker ${name} exited (${signal ?? code}); its last output:\n${tail()}`);
    });
  }
  const targets: Brokers = { urls: brokers.map((b) => b.url) };

  // Postgres itself, pooled or not: what it holds is what the samples count.
  const sql = postgres(database.url, { max: 1, connect_timeout: 3, onnotice: () => {} });
  cleanups.push(() => sql.end({ timeout: 1 }));
  const installations = await seedInstallations(targets, sim, sql);
  say(
    `soak: ready — ${database.description}${pooler ? ` behind ${pooler.description}` : ''}, 2 brokers, ${INSTALLATIONS} installations; running ${MINUTES} min`,
  );

  const startedAt = performance.now();
  const ledger = new Ledger(startedAt);
  const random = seededRandom(SEED);
  const sender = new WebhookSender({
    brokers: targets,
    installations,
    secret: SECRET,
    ledger,
    random,
    ratePerSecond: WEBHOOKS_PER_SECOND,
    racingShare: RACING_SHARE,
    redeliveryShare: REDELIVERY_SHARE,
    redeliveryDelayMs: REDELIVERY_DELAY_MS,
  });
  const consumers = new Consumers({ brokers: targets, installations, ledger, random, sentIds: sender.sentIds, hangUpShare: HANG_UP_SHARE });
  const side = sideTraffic({
    brokers: targets,
    installations,
    ledger,
    random,
    perSecond: SIDE_REQUESTS_PER_SECOND,
    until: () => ledger.now() >= RUN_MS,
  });

  const samples: Sample[] = [];
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      samples.push(await sample(ledger.now(), brokers, sql, pooler !== undefined));
      await sleep(SAMPLE_EVERY_MS);
    }
  })();
  const faults: FaultRecord[] = [];
  const progress = setInterval(() => {
    const now = ledger.now();
    say(
      `soak ${clock(now)} / ${clock(RUN_MS)}  sent ${ledger.accepted.size}  delivered ${ledger.deliveredCount()}  non-2xx ${ledger.nonTwoXxCount()}` +
        (faults.length > 0 ? `  (faults so far: ${faults.map((f) => f.fault).join(', ')})` : ''),
    );
  }, PROGRESS_EVERY_MS);
  cleanups.push(async () => clearInterval(progress));

  // Together, so a fault that fails ends the run (and its clean-up) at once.
  await Promise.all([sender.generate(RUN_MS), runFaults({ database, pooler, sim, brokers, ledger, faults }), side]);

  // The drain: refused events retried until accepted, then the apps given time to receive them all.
  say(`soak ${clock(ledger.now())}: the run is over; draining (refused webhooks retried, the apps receiving the rest)`);
  await sender.finish(ledger.now() + RETRY_DRAIN_MS);
  const deliveryDeadline = ledger.now() + DELIVERY_DRAIN_MS;
  while (ledger.undelivered() > 0 && ledger.now() < deliveryDeadline) await sleep(200);
  await sleep(QUIET_MS);
  await consumers.stop();
  sampling = false;
  await sampler;
  clearInterval(progress);

  for (const { broker, errors } of brokerErrors) {
    if (errors.count > 0) say(`soak: broker ${broker} logged ${errors.count} unexpected line(s); the first:\n${errors.first.join('\n')}`);
  }
  report = {
    ...summary({ ledger, samples, faults, brokerExits, pooler }),
    brokerUnexpectedLogLines: Object.fromEntries(brokerErrors.map(({ broker, errors }) => [broker, errors.count])),
  };
  // The bouncer's folder (and its log) goes with its clean-up: a failing run says its last words first.
  if (pooler && (report.failures as string[]).length > 0) say(`soak: PgBouncer's last log lines:\n${await pooler.logTail(40)}`);
}

/**
 * Keeps the broker's last output only (for a crash report) instead of all of it, and its
 * unexpected lines (the first few, and how many), which the report names.
 */
function keepTail(broker: BrokerProcess): { tail(): string; errors: { count: number; first: string[] } } {
  let tail = '';
  let partial = '';
  const errors = { count: 0, first: [] as string[] };
  broker.child.stdout!.removeAllListeners('data');
  broker.child.stderr!.removeAllListeners('data');
  // startBroker keeps every line the broker writes; over a long run that is the soak's memory.
  broker.child.stderr!.on('data', (chunk: Buffer) => {
    tail = (tail + chunk.toString('utf8')).slice(-16_384);
  });
  broker.child.stdout!.on('data', (chunk: Buffer) => {
    const text = chunk.toString('utf8');
    tail = (tail + text).slice(-16_384);
    const lines = (partial + text).split('\n');
    partial = lines.pop()!.slice(-65_536);
    for (const line of lines) {
      if (!UNEXPECTED.test(line)) continue;
      errors.count++;
      if (errors.first.length < 5) errors.first.push(line.slice(0, 2_000));
    }
  });
  return { tail: () => tail, errors };
}

/**
 * Installations registered over HTTP, each with an active GitHub account on Composio and one
 * trigger made through the broker (so the reconciliation with Composio finds it there).
 */
async function seedInstallations(brokers: Brokers, sim: Simulator, sql: postgres.Sql): Promise<SoakInstallation[]> {
  const installations: SoakInstallation[] = [];
  for (let index = 0; index < INSTALLATIONS; index++) {
    const url = brokers.urls[index % brokers.urls.length]!;
    const who = await registerOver(url);
    const composioUserId = composioUserIdFor(who.installationId);
    const account = sim.controls.createAccount({ userId: composioUserId, toolkit: 'github', alias: 'work', status: 'ACTIVE' });
    const response = await fetch(`${url}/v1/triggers`, {
      method: 'POST',
      headers: { ...who.auth, 'content-type': 'application/json' },
      body: JSON.stringify({
        automationId: `soak_${index}`,
        toolkit: 'github',
        triggerSlug: 'GITHUB_COMMIT_EVENT',
        connectedAccountId: account.id,
        config: { owner: 'ada', repo: `engine-${index}` },
      }),
    });
    if (response.status !== 201) throw new Error(`trigger not made: ${response.status} ${await response.text()}`);
    const { id } = (await response.json()) as { id: string };
    const [row] = await sql<{ composio_trigger_id: string }[]>`select composio_trigger_id from triggers where id = ${id}`;
    installations.push({
      index,
      installationId: who.installationId,
      auth: who.auth,
      composioUserId,
      composioTriggerId: row!.composio_trigger_id,
      connectedAccountId: account.id,
    });
  }
  return installations;
}

/**
 * Each broker's resident memory, and the database's client connections (none when it is away):
 * all of them, the pools', and the direct ones (see `Sample`).
 */
async function sample(at: number, brokers: readonly BrokerProcess[], sql: postgres.Sql, pooled: boolean): Promise<Sample> {
  const rssMb = brokers.map((b) => {
    try {
      return rounded(rssKiB(b.child.pid!) / 1024, 1);
    } catch {
      return Number.NaN;
    }
  });
  try {
    const [row] = await Promise.race([
      sql<{ total: number; named: number; direct: number }[]>`
        select count(*)::int as total,
               count(*) filter (where application_name = ${APPLICATION_NAMES.pool})::int as named,
               count(*) filter (where application_name in (${APPLICATION_NAMES.listen}, ${APPLICATION_NAMES.sessions}))::int as direct
          from pg_stat_activity
         where backend_type = 'client backend' and pid <> pg_backend_pid()`,
      sleep(3_000).then(() => []),
    ]);
    if (!row) return { at, rssMb };
    // Through the bouncer only the LISTEN and session-lock connections reach Postgres directly;
    // every other one is the bouncer's (its server pool), whatever name it last took on.
    const connections = { total: row.total, brokers: pooled ? row.total - row.direct : row.named, direct: row.direct };
    return { at, rssMb, connections };
  } catch {
    return { at, rssMb };
  }
}

/**
 * The faults, spread over the run: Composio answering 5xx in the first third (and with
 * `--pooled` PgBouncer killed after it), the database away (restarted, or failed over) and
 * Composio limiting in the middle one, Composio slow in the last one.
 */
async function runFaults(options: {
  database: SoakDatabase;
  pooler: SoakPooler | undefined;
  sim: Simulator;
  brokers: readonly BrokerProcess[];
  ledger: Ledger;
  faults: FaultRecord[];
}): Promise<void> {
  const { database, pooler, sim, brokers, ledger, faults } = options;
  const at = async (share: number) => {
    const wait = share * RUN_MS - ledger.now();
    if (wait > 0) await sleep(wait);
  };
  const composio = async (share: number, fault: string, spec: Parameters<Simulator['controls']['injectFault']>[0]) => {
    await at(share);
    faults.push({ fault, atS: seconds(ledger.now()), forS: seconds(COMPOSIO_FAULT_MS), ...spec });
    sim.controls.injectFault({ ...spec, durationMs: COMPOSIO_FAULT_MS });
  };

  /** A fault that takes something away: recorded with its own figures, then when both brokers answered `/health` 200 again. */
  const outage = async (share: number, fault: string, cause: (outageMs: number) => Promise<Record<string, unknown>>) => {
    await at(share);
    const record: FaultRecord = { fault, atS: seconds(ledger.now()) };
    faults.push(record);
    const startedAt = ledger.now();
    Object.assign(record, await cause(DATABASE_OUTAGE_MS));
    const back = await Promise.all(brokers.map((broker) => healthy(broker.url, 60_000)));
    // null: a broker was still not healthy a minute after the fault ended.
    record.brokersHealthyAfterS = back.every(Boolean) ? seconds(ledger.now() - startedAt) : null;
  };

  await composio(0.15, 'composio_5xx', { status: 503 });
  if (pooler) await outage(0.3, pooler.faultName, (ms) => pooler.fault(ms));
  await outage(0.45, database.faultName, (ms) => database.fault(ms));
  await composio(0.6, 'composio_429', { status: 429, retryAfter: 2 });
  await composio(0.78, 'composio_slow', { delayMs: 4_000 });
}

/** Whether the broker answered `/health` 200 within `timeoutMs`. */
async function healthy(url: string, timeoutMs: number): Promise<boolean> {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    const status = await fetch(`${url}/health`, { signal: AbortSignal.timeout(2_000) }).then(
      (r) => r.status,
      () => 0,
    );
    if (status === 200) return true;
    await sleep(100);
  }
  return false;
}

/** The figures of one third of the run. */
function third(samples: Sample[], ledger: Ledger, from: number, to: number) {
  const within = samples.filter((s) => s.at >= from && s.at < to);
  const rss = (i: number) => within.map((s) => s.rssMb[i]!).filter(Number.isFinite);
  const connections = within.flatMap((s) => (s.connections ? [s.connections.total] : []));
  const brokerConnections = within.flatMap((s) => (s.connections ? [s.connections.brokers] : []));
  const directConnections = within.flatMap((s) => (s.connections ? [s.connections.direct] : []));
  const latencies = ledger.latencies.filter((l) => l.acceptedAt >= from && l.acceptedAt < to).map((l) => l.ms);
  return {
    fromS: seconds(from),
    toS: seconds(to),
    brokerRssMb: ['A', 'B'].map((name, i) => ({ broker: name, median: middle(rss(i)), max: maxOf(rss(i)) })),
    // All client connections (the soak's own left out): with --pooled, all Postgres holds (the
    // bouncer's server pool and the brokers' direct connections). `brokers`: the brokers' pools
    // (`application_name` omb-broker/<release>; with --pooled, the bouncer's server connections).
    // `direct`: the LISTEN and session-lock connections.
    pgConnections: {
      median: middle(connections),
      max: maxOf(connections),
      brokersMedian: middle(brokerConnections),
      brokersMax: maxOf(brokerConnections),
      directMedian: middle(directConnections),
      directMax: maxOf(directConnections),
      samples: connections.length,
    },
    deliveryLatencyMs: {
      p50: latencies.length ? rounded(percentile(latencies, 50), 1) : null,
      p99: latencies.length ? rounded(percentile(latencies, 99), 1) : null,
      events: latencies.length,
    },
  };
}

/** The JSON line: counts, faults, the first and last thirds, and the verdicts. */
function summary(options: {
  ledger: Ledger;
  samples: Sample[];
  faults: FaultRecord[];
  brokerExits: string[];
  pooler: SoakPooler | undefined;
}) {
  const { ledger, samples, faults, brokerExits, pooler } = options;
  const first = third(samples, ledger, 0, RUN_MS / 3);
  const last = third(samples, ledger, (2 * RUN_MS) / 3, RUN_MS + 1);
  // Memory: a broker grows when its last third's median is over its first's by 15 % and 15 MB
  // (the first third already holds the warm-up). Connections: when the pools' connections in the
  // last third were more than in the first by over 2, or there were ever more than the two pools
  // (each DATABASE_POOL_SIZE plus its LISTEN and /health connections). With --pooled, the pools'
  // are the bouncer's server connections, and the bound is on all Postgres holds: the server pool
  // and each broker's direct connections (the session-lock ones come and go with the jobs, so
  // they are left out of the thirds' comparison).
  const memory = first.brokerRssMb.map((f, i) => {
    const l = last.brokerRssMb[i]!;
    const grew = f.median !== null && l.median !== null && l.median > f.median * 1.15 && l.median - f.median > 15;
    return { broker: f.broker, firstMb: f.median, lastMb: l.median, verdict: grew ? 'growing' : 'flat' };
  });
  const poolBound = pooler ? pooler.serverPoolSize + 2 * DIRECT_CONNECTIONS_PER_BROKER : 2 * (POOL_SIZE + 2);
  const counted = (c: NonNullable<Sample['connections']>) => (pooler ? c.total : c.brokers);
  const firstMax = first.pgConnections.brokersMax;
  const lastMax = last.pgConnections.brokersMax;
  const mostBrokerConnections = maxOf(samples.flatMap((s) => (s.connections ? [counted(s.connections)] : [])));
  const connectionsGrew = (firstMax !== null && lastMax !== null && lastMax > firstMax + 2) || (mostBrokerConnections ?? 0) > poolBound;
  const lost = ledger.undelivered();
  const nonTwoXx = ledger.nonTwoXxByStatus();
  const failures = [
    ...(lost > 0 ? [`${lost} accepted event(s) never delivered`] : []),
    ...(ledger.duplicated > 0 ? [`${ledger.duplicated} event(s) delivered more than once`] : []),
    ...(ledger.outOfOrder > 0 ? [`${ledger.outOfOrder} event(s) delivered out of order`] : []),
    ...(ledger.foreign > 0 ? [`${ledger.foreign} delivered event(s) not sent to that installation`] : []),
    ...(ledger.redeliveriesStoredAgain > 0 ? [`${ledger.redeliveriesStoredAgain} redelivery(ies) stored again`] : []),
    ...(ledger.gaps > 0 ? [`${ledger.gaps} poll(s) answered with a gap`] : []),
    ...(Object.keys(ledger.unexpectedOutcomes).length > 0 ? [`webhook outcomes other than accepted/duplicate`] : []),
    ...(nonTwoXx['500'] ? [`${nonTwoXx['500']} answer(s) 500`] : []),
    ...brokerExits,
  ];
  return {
    minutes: MINUTES,
    standby: args.standby,
    pooled: args.pooled,
    // With --pooled: the bouncer's server pool, beside the brokers' pools (each DATABASE_POOL_SIZE and a health connection).
    pgbouncer: pooler ? { poolMode: 'transaction', serverPoolSize: pooler.serverPoolSize, brokerPoolsTogether: 2 * (POOL_SIZE + 1) } : null,
    seed: SEED,
    sent: ledger.accepted.size,
    delivered: ledger.deliveredCount(),
    lost,
    duplicated: ledger.duplicated,
    outOfOrder: ledger.outOfOrder,
    abandoned: ledger.abandoned,
    nonTwoXx,
    nonTwoXxByRequest: ledger.nonTwoXx,
    nonTwoXxExamples: ledger.nonTwoXxExamples,
    unexpectedOutcomes: ledger.unexpectedOutcomes,
    traffic: {
      webhookAttempts: ledger.webhookAttempts,
      redeliveries: ledger.redeliveries,
      polls: ledger.polls,
      pollsHungUp: ledger.pollsHungUp,
      acknowledgements: ledger.acknowledgements,
      sideRequests: ledger.sideRequests,
    },
    faults,
    firstThird: first,
    lastThird: last,
    growth: {
      memory,
      connections: {
        // firstMax and lastMax are the pools' connections; mostSeen and poolBound count what `bounded` says.
        bounded: pooler ? 'all Postgres connections' : "the brokers' pools",
        firstMax,
        lastMax,
        mostSeen: mostBrokerConnections,
        poolBound,
        verdict: connectionsGrew ? 'growing' : 'flat',
      },
      verdict: memory.some((m) => m.verdict === 'growing') || connectionsGrew ? 'growing' : 'flat',
    },
    failures,
  };
}

function middle(values: number[]): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

function maxOf(values: number[]): number | null {
  return values.length === 0 ? null : Math.max(...values);
}

function seconds(ms: number): number {
  return rounded(ms / 1000, 1);
}

function clock(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
}
