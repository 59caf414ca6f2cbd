import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { Agent } from 'node:http';
import { cpus, loadavg } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { Worker } from 'node:worker_threads';
import postgres from 'postgres';
import { startEmbeddedPostgres } from '../src/db/embedded.js';
import { applyMigrations } from '../src/db/migrate.js';
import { composioUserIdFor, hashToken } from '../src/installations/tokens.js';
import { createLogger } from '../src/logger.js';
import {
  benchBrokerEnv,
  benchRun,
  type Child,
  clockTicksPerSecond,
  fmt,
  heading,
  httpCall,
  line,
  MEMORY_PROBE,
  machineBusySeconds,
  memoryAfterGc,
  type ProbedMemory,
  percentile,
  residentKib,
  rounded,
  startChild,
} from './lib.js';

/**
 * `npm run bench:idle`: what an IDLE long poll costs the broker (`GET /v1/events` with a bearer
 * token, for an installation with nothing queued), beside an ideal in-memory poll server
 * (bench/idle-baseline.ts) measured in the same run, one after the other. Everything is loopback:
 * an embedded Postgres (with pg_stat_statements) in a temporary folder, the broker started as
 * `npm start` starts it (default log level `info`, its output discarded), the load from this
 * process. Only the public HTTP API and the database are used, so the bench runs on any version of
 * the broker.
 *
 * 1. `wait=0`, the request path alone: 64 keep-alive clients round-robin over 1,000 installations.
 * 2. The whole cycle: 1,000 clients, one per installation, each polling `wait=1` with the cursor
 *    its last answer gave.
 *    For both: answers, and per answer the Postgres statements (pg_stat_statements, the broker's
 *    database only), WAL bytes, the server process's CPU and Postgres's (all its processes).
 * 3. Held polls (`wait=25`, each on its own socket): memory per poll after a compacting GC (the
 *    slope between a fifth and all of them held), and `/health` p50/p99 from one more client while
 *    they arrive and while they are held; 10,000, then `--held-max` (default 50,000).
 *
 * Options: --seconds S (each measured run of 1 and 2, default 15; each after 2 s of warm-up),
 * --held-max N (the largest number of held polls; 10000 or less runs one step only).
 * The last line is one JSON object.
 */

const { values: args } = parseArgs({
  options: {
    seconds: { type: 'string', default: '15' },
    'held-max': { type: 'string', default: '50000' },
  },
});
const RUN_MS = Number(args.seconds) * 1000;
const HELD_MAX = Number(args['held-max']);
if (!(RUN_MS >= 1000 && RUN_MS <= 600_000)) throw new Error('--seconds must be between 1 and 600');
if (!Number.isInteger(HELD_MAX) || HELD_MAX < 100 || HELD_MAX > 200_000)
  throw new Error('--held-max must be an integer from 100 to 200000');

const INSTALLATIONS = 1000;
const WAIT0_CLIENTS = 64;
const WARMUP_MS = 2000;
const FIRST_HELD_STEP = 10_000;
const HELD_STEPS = HELD_MAX <= FIRST_HELD_STEP ? [HELD_MAX] : [FIRST_HELD_STEP, HELD_MAX];
/** Polls opened at once while they arrive; the next wave waits until the server holds all but this many. */
const WAVE = 500;
/** Client sockets per source address: one address has about 28,000 ephemeral ports toward one destination. */
const SOCKETS_PER_ADDRESS = 10_000;
/** Descriptors beyond the held sockets: the database pool, the other clients, the runtime's own. */
const FD_MARGIN = 4096;
const HELD_WAIT_SECONDS = 25;
/**
 * Between one `/health` answer and the next call. Not zero: on two cores a client calling the
 * broker's `/health` (a database round trip each) back to back is a load of its own, which slowed
 * the polls' arrival past their 25 s deadline.
 */
const HEALTH_GAP_MS = 10;
/** How long `/health` is sampled once all polls are held (less when their deadline nears). */
const HELD_SAMPLE_MS = 3000;
const DATABASE = 'omb_idle';
const METRICS_TOKEN = randomBytes(16).toString('hex');
const SECRET = 'whsec_bench_idle_0123456789abcdef';
const RAISED = 'OMB_BENCH_IDLE_FILE_LIMIT_RAISED';

// The held polls need a descriptor each, here and in the server: below that, run again under a
// raised `ulimit -n` (Node cannot raise its own), or leave out the steps that cannot fit.
const wanted = Math.max(...HELD_STEPS) + FD_MARGIN;
let limits = fileLimits();
if (limits.soft < wanted && !process.env[RAISED]) {
  const target = canSetFileLimit(wanted) ? wanted : limits.hard;
  if (target > limits.soft) {
    process.stdout.write(`(open-file limit ${limits.soft}: running again under ulimit -n ${target})\n`);
    const again = spawn(
      'sh',
      ['-c', `ulimit -n ${target} && exec "$0" "$@"`, process.execPath, ...process.execArgv, ...process.argv.slice(1)],
      { stdio: 'inherit', env: { ...process.env, [RAISED]: '1' } },
    );
    // A terminal's ^C reaches both processes; the child cleans up, this one waits for it.
    for (const signal of ['SIGINT', 'SIGHUP'] as const) process.on(signal, () => undefined);
    process.on('SIGTERM', () => again.kill('SIGTERM'));
    const code = await new Promise<number>((resolve) => again.once('exit', (c, s) => resolve(c ?? (s ? 128 : 1))));
    process.exit(code);
  }
}
limits = fileLimits();
const fits = (count: number) => count + FD_MARGIN <= limits.soft;
const heldToRun = HELD_STEPS.filter(fits);
const SERVER_FILE_LIMIT = Math.max(1024, Math.max(0, ...heldToRun) + FD_MARGIN);

const log = createLogger('warn');
const { startedAt, dataDir, cleanups, run } = await benchRun('omb-bench-idle-');

interface Target {
  readonly name: 'broker' | 'ideal';
  readonly server: Child;
  /** Polls the server holds now (`omb_long_polls_waiting` on `/metrics`), NaN if it does not say. */
  heldNow(): Promise<number>;
}

async function main(): Promise<void> {
  const loadAtStart = rounded(loadavg()[0]!);
  process.stdout.write('Setting up: embedded Postgres with pg_stat_statements, migrations, installations, the broker, the ideal server…\n');
  const embedded = await startEmbeddedPostgres({
    dataDir,
    logger: log,
    database: DATABASE,
    extraFlags: ['-c', 'shared_preload_libraries=pg_stat_statements', '-c', 'pg_stat_statements.track=all', '-c', 'max_connections=300'],
  });
  cleanups.push(() => embedded.stop());
  const postmaster = Number(readFileSync(path.join(dataDir, 'postgres', 'postmaster.pid'), 'utf8').split('\n')[0]);
  // The bench's own statements run on another database, so that filtering by the broker's leaves them out.
  const adminUrl = new URL(embedded.url);
  adminUrl.pathname = '/postgres';
  const admin = postgres(adminUrl.toString(), { max: 1, onnotice: () => {} });
  cleanups.push(() => admin.end({ timeout: 5 }));
  await admin`create extension if not exists pg_stat_statements`;
  const [version] = await admin<{ v: string }[]>`select current_setting('server_version') as v`;
  await applyMigrations(embedded.url, log);

  const tokens = Array.from({ length: Math.max(INSTALLATIONS, ...heldToRun) }, () => randomBytes(32).toString('hex'));
  const sql = postgres(embedded.url, { max: 1, onnotice: () => {} });
  for (let i = 0; i < tokens.length; i += 5000) {
    await sql`insert into installations ${sql(
      tokens.slice(i, i + 5000).map((token) => {
        const id = randomUUID();
        return { id, token_hash: hashToken(token), composio_user_id: composioUserIdFor(id) };
      }),
    )}`;
  }
  await sql`vacuum analyze installations`;
  await sql.end({ timeout: 5 });

  const childOptions = { discardStdout: true, fileLimit: SERVER_FILE_LIMIT };
  // As events.ts starts its brokers, but at the default log level (`info`, as in production) and
  // with a per-installation limit no poll here reaches.
  const broker = await startChild(
    'src/main.ts',
    {
      ...benchBrokerEnv(embedded.url, SECRET, METRICS_TOKEN),
      EVENT_REQUESTS_PER_MINUTE: '100000',
      NODE_OPTIONS: MEMORY_PROBE,
    },
    '/health',
    childOptions,
  );
  cleanups.push(() => broker.stop());
  const ideal = await startChild(
    'bench/idle-baseline.ts',
    { DATABASE_URL: embedded.url, NODE_OPTIONS: MEMORY_PROBE },
    '/health',
    childOptions,
  );
  cleanups.push(() => ideal.stop());
  watchdog([broker, ideal]);
  const heldOn = (server: Child, headers: Record<string, string>) => async () => {
    const text = await fetch(`${server.url}/metrics`, { headers, signal: AbortSignal.timeout(5_000) }).then(
      (r) => (r.ok ? r.text() : ''),
      () => '',
    );
    const match = /^omb_long_polls_waiting (\d+)/m.exec(text);
    return match ? Number(match[1]) : Number.NaN;
  };
  const targets: Target[] = [
    { name: 'broker', server: broker, heldNow: heldOn(broker, { authorization: `Bearer ${METRICS_TOKEN}` }) },
    { name: 'ideal', server: ideal, heldNow: heldOn(ideal, {}) },
  ];
  const counters = new Counters(admin, postmaster, [broker, ideal]);
  process.stdout.write(
    `Ready: Postgres ${version!.v}, ${fmt.int(tokens.length)} installations (nothing queued), broker at LOG_LEVEL info (stdout discarded), ` +
      `Node ${process.version}, ${cpus().length} cores, open-file limit ${limits.soft}, load average ${loadText()}; load from this process.\n`,
  );

  const wait0 = await wait0Figures(targets, tokens.slice(0, INSTALLATIONS), counters);
  const cycle = await cycleFigures(targets, tokens.slice(0, INSTALLATIONS), counters);
  const held: Record<string, unknown> = {};
  for (const count of HELD_STEPS) {
    const key = `held${count % 1000 === 0 ? `${count / 1000}k` : count}`;
    if (!fits(count)) {
      const reason =
        `needs ${fmt.int(count + FD_MARGIN)} open files in this process and in the server, and the limit here is ${limits.soft} ` +
        `(hard limit ${limits.hard}; \`ulimit -n ${count + FD_MARGIN}\` is refused: raising it needs CAP_SYS_RESOURCE or a higher hard limit)`;
      heading(`3. ${fmt.int(count)} held polls: not measured`);
      note(`skipped: ${reason}`);
      held[key] = { skipped: reason };
      continue;
    }
    held[key] = await heldFigures(targets, count, tokens, counters);
  }

  const seconds = Math.round((performance.now() - startedAt) / 1000);
  // Anything else running on the machine meanwhile shows here (the figures share its cores).
  process.stdout.write(`\n(${seconds} s in all; load average now ${loadText()})\n`);
  const machine = { cores: cpus().length, loadAverageAtStart: loadAtStart, loadAverageAtEnd: rounded(loadavg()[0]!) };
  process.stdout.write(`${JSON.stringify({ wait0, cycle, ...held, seconds, machine })}\n`);
}

// ---------------------------------------------------------------------------------------------
// What a measured run cost: statements, WAL, CPU.

interface Usage {
  /** Statements the broker's database ran (pg_stat_statements, track=all: nested ones too). */
  statements: number;
  /** Of which top-level (what clients sent). */
  topLevel: number;
  /** Statements by text, most called first. */
  byQuery: Array<{ query: string; calls: number }>;
  walBytes: number;
  serverCpuUs: number;
  postgresCpuUs: number;
  /** CPU the rest of the machine used meanwhile (not this bench, its servers or Postgres), in cores: 0 on a quiet machine. */
  otherCores: number;
  ms: number;
}

class Counters {
  private readonly tickUs = 1e6 / clockTicksPerSecond();

  constructor(
    private readonly admin: postgres.Sql,
    private readonly postmaster: number,
    /** Every server this bench started (both are running whichever is measured). */
    private readonly servers: Child[],
  ) {}

  /** Resets the statistics and reads where WAL and CPU stand: the window starts when this resolves. */
  async start(server: Child) {
    await this.admin`select pg_stat_statements_reset()`;
    const [wal] = await this.admin<{ lsn: string }[]>`select pg_current_wal_lsn()::text as lsn`;
    return { lsn: wal!.lsn, serverUs: this.processUs(server), postgresUs: this.postgresUs(), ...this.machine(), at: performance.now() };
  }

  /** What was spent since `start` (CPU read at once, before the statements that read the rest). */
  async end(server: Child, start: Awaited<ReturnType<Counters['start']>>): Promise<Usage> {
    const serverUs = this.processUs(server);
    const postgresUs = this.postgresUs();
    const machine = this.machine();
    const ms = performance.now() - start.at;
    const [wal] = await this.admin<{ bytes: string }[]>`
      select pg_wal_lsn_diff(pg_current_wal_lsn(), ${start.lsn}::pg_lsn)::bigint::text as bytes`;
    const rows = await this.admin<{ query: string; calls: string; toplevel: boolean }[]>`
      select query, calls::text, toplevel from pg_stat_statements
       where dbid = (select oid from pg_database where datname = ${DATABASE})
         and query not ilike '%pg_stat_statements%' and query not ilike '%pg_current_wal%'`;
    const byText = new Map<string, number>();
    for (const row of rows) {
      const text = row.query.replace(/\s+/g, ' ').trim();
      byText.set(text, (byText.get(text) ?? 0) + Number(row.calls));
    }
    return {
      statements: rows.reduce((sum, row) => sum + Number(row.calls), 0),
      topLevel: rows.filter((row) => row.toplevel).reduce((sum, row) => sum + Number(row.calls), 0),
      byQuery: [...byText].map(([query, calls]) => ({ query, calls })).sort((a, b) => b.calls - a.calls),
      walBytes: Number(wal!.bytes),
      serverCpuUs: serverUs - start.serverUs,
      postgresCpuUs: postgresUs - start.postgresUs,
      otherCores: this.otherCores(start, machine, ms),
      ms,
    };
  }

  /** Where the machine's busy CPU time stands, and this bench's share of it (this process, its servers, Postgres). */
  machine(): { busyUs: number; ownUs: number } {
    const self = statFields(process.pid)!;
    const ownUs =
      (Number(self[11]) + Number(self[12])) * this.tickUs +
      this.servers.reduce((sum, server) => sum + this.processUs(server), 0) +
      this.postgresUs();
    return { busyUs: machineBusySeconds() * 1e6, ownUs };
  }

  /** The cores the rest of the machine used between two `machine()` readings `ms` apart. */
  otherCores(start: { busyUs: number; ownUs: number }, end: { busyUs: number; ownUs: number }, ms: number): number {
    return Math.max(0, end.busyUs - start.busyUs - (end.ownUs - start.ownUs)) / (ms * 1000);
  }

  /** utime + stime of the server's Node process. */
  private processUs(server: Child): number {
    const fields = statFields(server.process.pid!);
    if (!fields) throw new Error(`the server (pid ${server.process.pid}) is gone`);
    return (Number(fields[11]) + Number(fields[12])) * this.tickUs;
  }

  /**
   * Every Postgres process: the postmaster's own time and what its exited children left it
   * (cutime, cstime), and every live child's. A backend that ends during the run moves from the
   * second sum to the first, whole; one that starts and ends within it is counted once it is reaped.
   */
  private postgresUs(): number {
    const own = statFields(this.postmaster);
    if (!own) throw new Error(`Postgres (pid ${this.postmaster}) is gone`);
    let ticks = Number(own[11]) + Number(own[12]) + Number(own[13]) + Number(own[14]);
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      const fields = statFields(Number(entry));
      if (fields && Number(fields[1]) === this.postmaster) ticks += Number(fields[11]) + Number(fields[12]);
    }
    return ticks * this.tickUs;
  }
}

/** /proc/<pid>/stat from its third field on (`state`, `ppid`, …; utime is [11]), or null once the process is gone. */
function statFields(pid: number): string[] | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return text.slice(text.lastIndexOf(')') + 2).split(' ');
  } catch {
    return null;
  }
}

// ---------------------------------------------------------------------------------------------
// 1 and 2: clients polling in a loop, a measured window after a warm-up.

interface Window {
  /** Answers that arrived inside the window (200 with no events). */
  answered: number;
  /** Other answers or errors inside the window. */
  failed: number;
  /** Latency of each call that both started and ended inside the window. */
  latenciesMs: number[];
  usage: Usage;
}

/**
 * `clients` loops calling `call(client)` back to back: warm-up, then the window (counters reset
 * as it opens and read as it closes, the load running throughout), then the loops are stopped.
 */
async function measure(options: {
  target: Target;
  counters: Counters;
  clients: number;
  call: (client: number) => Promise<boolean>;
}): Promise<Window> {
  const state = { counting: false, stop: false };
  let answered = 0;
  let failed = 0;
  const latenciesMs: number[] = [];
  const loop = async (client: number) => {
    while (!state.stop) {
      const startedInside = state.counting;
      const t0 = performance.now();
      const ok = await options.call(client).catch(() => false);
      if (state.counting) {
        if (ok) answered++;
        else failed++;
        if (startedInside) latenciesMs.push(performance.now() - t0);
      }
      // A failure (refused, 429, 503) is not retried in a tight loop.
      if (!ok) await sleep(20);
    }
  };
  const loops = Promise.all(Array.from({ length: options.clients }, (_, client) => loop(client)));
  await sleep(WARMUP_MS);
  const start = await options.counters.start(options.target.server);
  state.counting = true;
  await sleep(RUN_MS);
  state.counting = false;
  const usage = await options.counters.end(options.target.server, start);
  state.stop = true;
  await Promise.race([loops, sleep(30_000)]);
  return { answered, failed, latenciesMs, usage };
}

/** The figures of one server's window, per answer. */
function perAnswer(window: Window) {
  const n = Math.max(1, window.answered);
  return {
    answered: window.answered,
    rate: window.answered / (window.usage.ms / 1000),
    statements: window.usage.statements / n,
    topLevel: window.usage.topLevel / n,
    walBytes: window.usage.walBytes / n,
    serverCpuUs: window.usage.serverCpuUs / n,
    postgresCpuUs: window.usage.postgresCpuUs / n,
    totalCpuUs: (window.usage.serverCpuUs + window.usage.postgresCpuUs) / n,
    p50: percentile(window.latenciesMs, 50),
    p99: percentile(window.latenciesMs, 99),
    failed: window.failed,
  };
}

/** Broker beside ideal, one line per figure, and the broker's statements by text. */
function report(unit: string, broker: Window, ideal: Window) {
  const b = perAnswer(broker);
  const i = perAnswer(ideal);
  const ratio = (x: number, y: number) => (y > 0 ? `${(x / y).toFixed(1)}×` : '—');
  const us = (n: number) => `${fmt.int(n)} µs`;
  const failures = (w: ReturnType<typeof perAnswer>) => (w.failed > 0 ? ` (${fmt.int(w.failed)} failed)` : '');
  line(
    `${unit}s answered`,
    `broker ${fmt.int(b.answered)} (${fmt.rate(b.rate)})${failures(b)}`,
    `ideal ${fmt.int(i.answered)} (${fmt.rate(i.rate)})${failures(i)}`,
  );
  line(`latency per ${unit}`, `broker p50 ${fmt.ms(b.p50)}, p99 ${fmt.ms(b.p99)}`, `ideal p50 ${fmt.ms(i.p50)}, p99 ${fmt.ms(i.p99)}`);
  line(
    `Postgres statements per ${unit} (all, with nested / top-level)`,
    `broker ${b.statements.toFixed(3)} / ${b.topLevel.toFixed(3)}`,
    `ideal ${i.statements.toFixed(3)} / ${i.topLevel.toFixed(3)}`,
  );
  line(`WAL bytes per ${unit}`, `broker ${b.walBytes.toFixed(1)}`, `ideal ${i.walBytes.toFixed(1)}`);
  line(`server process CPU per ${unit}`, `broker ${us(b.serverCpuUs)}`, `ideal ${us(i.serverCpuUs)}`, ratio(b.serverCpuUs, i.serverCpuUs));
  line(`Postgres CPU per ${unit} (all its processes)`, `broker ${us(b.postgresCpuUs)}`, `ideal ${us(i.postgresCpuUs)}`);
  line(`CPU per ${unit}, server + Postgres`, `broker ${us(b.totalCpuUs)}`, `ideal ${us(i.totalCpuUs)}`, ratio(b.totalCpuUs, i.totalCpuUs));
  line(
    'other processes on this machine meanwhile (cores)',
    `broker's run ${broker.usage.otherCores.toFixed(2)}`,
    `ideal's run ${ideal.usage.otherCores.toFixed(2)}${Math.max(broker.usage.otherCores, ideal.usage.otherCores) > 0.1 ? '   (not quiet: figures disturbed)' : ''}`,
  );
  // Statements run less than once per thousand answers are the broker's background jobs, not the polls'.
  const shown = broker.usage.byQuery.filter((q) => q.calls / Math.max(1, b.answered) >= 0.001).slice(0, 8);
  const background = broker.usage.byQuery.filter((q) => q.calls / Math.max(1, b.answered) < 0.001);
  note(
    `(the ideal's Postgres and WAL figures are the background: the broker's own jobs, idle meanwhile; ` +
      `${fmt.int(background.reduce((n, q) => n + q.calls, 0))} broker statements of ${background.length} kinds ran less than once per thousand ${unit}s)`,
  );
  if (shown.length > 0) {
    note(`broker's statements per ${unit}, by text (the ${shown.length} run at least once per thousand):`);
    for (const { query, calls } of shown) {
      process.stdout.write(
        `      ${(calls / Math.max(1, b.answered)).toFixed(3).padStart(7)}  ${query.length > 150 ? `${query.slice(0, 147)}…` : query}\n`,
      );
    }
  }
  return {
    [`${unit}s`]: b.answered,
    [`ideal${unit[0]!.toUpperCase()}${unit.slice(1)}s`]: i.answered,
    perSecond: rounded(b.rate),
    idealPerSecond: rounded(i.rate),
    [`statementsPer${cap(unit)}`]: rounded(b.statements, 3),
    [`topLevelStatementsPer${cap(unit)}`]: rounded(b.topLevel, 3),
    [`walBytesPer${cap(unit)}`]: rounded(b.walBytes, 1),
    [`brokerCpuUsPer${cap(unit)}`]: rounded(b.serverCpuUs, 1),
    [`postgresCpuUsPer${cap(unit)}`]: rounded(b.postgresCpuUs, 1),
    [`idealStatementsPer${cap(unit)}`]: rounded(i.statements, 3),
    [`idealWalBytesPer${cap(unit)}`]: rounded(i.walBytes, 1),
    [`idealCpuUsPer${cap(unit)}`]: rounded(i.serverCpuUs, 1),
    [`idealPostgresCpuUsPer${cap(unit)}`]: rounded(i.postgresCpuUs, 1),
    // Server process and Postgres together, broker ÷ ideal; the processes alone beside it.
    cpuRatioToIdeal: rounded(b.totalCpuUs / i.totalCpuUs),
    processCpuRatioToIdeal: rounded(b.serverCpuUs / i.serverCpuUs),
    p50Ms: rounded(b.p50),
    p99Ms: rounded(b.p99),
    idealP50Ms: rounded(i.p50),
    idealP99Ms: rounded(i.p99),
    failed: b.failed,
    idealFailed: i.failed,
    otherCores: rounded(broker.usage.otherCores),
    idealOtherCores: rounded(ideal.usage.otherCores),
  };
}

/** A line of the report without figures. */
const note = (text: string) => process.stdout.write(`  ${text}\n`);
const cap = (word: string) => `${word[0]!.toUpperCase()}${word.slice(1)}`;
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
/** The cursor of an answer with no events, or null for any other answer. */
const emptyAnswerCursor = (body: string) => (body.includes('"events":[]') ? (/"cursor":"([^"]+)"/.exec(body)?.[1] ?? null) : null);

async function wait0Figures(targets: Target[], tokens: string[], counters: Counters) {
  heading(
    `1. wait=0, the request path alone: ${WAIT0_CLIENTS} keep-alive clients round-robin over ${fmt.int(tokens.length)} installations, ` +
      `${RUN_MS / 1000} s after ${WARMUP_MS / 1000} s warm-up`,
  );
  const windows: Window[] = [];
  for (const target of targets) {
    const agent = new Agent({ keepAlive: true, maxSockets: WAIT0_CLIENTS });
    let next = 0;
    windows.push(
      await measure({
        target,
        counters,
        clients: WAIT0_CLIENTS,
        call: async () => {
          const answer = await httpCall(agent, `${target.server.url}/v1/events?wait=0`, {
            headers: bearer(tokens[next++ % tokens.length]!),
          });
          return answer.status === 200 && emptyAnswerCursor(answer.body) !== null;
        },
      }),
    );
    agent.destroy();
  }
  const { polls, idealPolls, ...rest } = report('poll', windows[0]!, windows[1]!);
  return { polls, idealPolls, ...rest };
}

async function cycleFigures(targets: Target[], tokens: string[], counters: Counters) {
  heading(
    `2. The whole cycle: ${fmt.int(tokens.length)} clients, one per installation, each polling wait=1 with the cursor its last answer gave, ` +
      `${RUN_MS / 1000} s after ${WARMUP_MS / 1000} s warm-up`,
  );
  const windows: Window[] = [];
  for (const target of targets) {
    const agent = new Agent({ keepAlive: true, maxSockets: tokens.length });
    const cursors: Array<string | undefined> = [];
    windows.push(
      await measure({
        target,
        counters,
        clients: tokens.length,
        call: async (client) => {
          const cursor = cursors[client];
          const answer = await httpCall(agent, `${target.server.url}/v1/events?wait=1${cursor ? `&cursor=${cursor}` : ''}`, {
            headers: bearer(tokens[client]!),
          });
          const next = answer.status === 200 ? emptyAnswerCursor(answer.body) : null;
          // A cursor refused starts the client again from its acknowledged position.
          cursors[client] = next ?? (answer.status === 400 ? undefined : cursor);
          return next !== null;
        },
      }),
    );
    agent.destroy();
  }
  const figures = report('cycle', windows[0]!, windows[1]!);
  note('(a cycle waits 1 s on each server: its latency beyond that is the overhead)');
  return figures;
}

// ---------------------------------------------------------------------------------------------
// 3: held polls.

/**
 * The `/health` client: a worker thread of its own (so that opening thousands of polls from this
 * thread does not delay it), calling one after another on one keep-alive socket from start to
 * stop, HEALTH_GAP_MS apart, each call stamped with when it started and how long it took.
 */
const HEALTH_WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const http = require('node:http');
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
const now = () => performance.timeOrigin + performance.now();
let stopped = false;
parentPort.on('message', () => { stopped = true; });
const call = () => new Promise((resolve) => {
  const req = http.request(workerData.url + '/health', { agent }, (res) => {
    res.resume();
    res.on('end', () => resolve(res.statusCode === 200));
    res.on('error', () => resolve(false));
  });
  req.on('error', () => resolve(false));
  req.end();
});
(async () => {
  const samples = [];
  while (!stopped) {
    const t0 = now();
    const ok = await call();
    samples.push(t0, now() - t0, ok ? 1 : 0);
    await new Promise((resolve) => setTimeout(resolve, workerData.gapMs));
  }
  agent.destroy();
  parentPort.postMessage(samples);
})();
`;

/** `/health` called one call after another from its own thread; a phase keeps the calls that started and ended within it. */
class HealthProbe {
  private readonly worker: Worker;
  private readonly phases: Array<{ name: string; from: number; to: number }> = [];
  /** Flat: start (ms since the epoch), duration (ms), 1 for a 200. */
  private samples: number[] = [];

  constructor(url: string) {
    this.worker = new Worker(HEALTH_WORKER, { eval: true, workerData: { url, gapMs: HEALTH_GAP_MS } });
  }

  /** From now on the calls belong to `phase` (none: `null`). */
  during(phase: string | null): void {
    const at = performance.timeOrigin + performance.now();
    const last = this.phases.at(-1);
    if (last && last.to === Number.POSITIVE_INFINITY) last.to = at;
    if (phase !== null) this.phases.push({ name: phase, from: at, to: Number.POSITIVE_INFINITY });
  }

  async stop(): Promise<void> {
    this.during(null);
    const samples = new Promise<number[]>((resolve) => this.worker.once('message', resolve));
    this.worker.postMessage('stop');
    this.samples = (await Promise.race([samples, sleep(10_000).then(() => [])])) as number[];
    await this.worker.terminate();
  }

  private within(phase: string): Array<{ ms: number; ok: boolean }> {
    const intervals = this.phases.filter((p) => p.name === phase);
    const found = [];
    for (let i = 0; i + 2 < this.samples.length; i += 3) {
      const [start, ms, ok] = [this.samples[i]!, this.samples[i + 1]!, this.samples[i + 2]!];
      if (intervals.some((p) => start >= p.from && start + ms <= p.to)) found.push({ ms, ok: ok === 1 });
    }
    return found;
  }

  figures(phase: string) {
    const times = this.within(phase).map((s) => s.ms);
    return { samples: times.length, p50: percentile(times, 50), p99: percentile(times, 99) };
  }

  /** Calls within any phase that did not answer 200. */
  get failed(): number {
    return [...new Set(this.phases.map((p) => p.name))].reduce((n, phase) => n + this.within(phase).filter((s) => !s.ok).length, 0);
  }
}

/** Source addresses for the held sockets: each hold takes fresh ones (the last hold's ports may still be in TIME_WAIT). */
let nextAddress = 2;

interface HoldFigures {
  held: number;
  heapKibPerPoll: number;
  kibPerPoll: number | null;
  rawKibPerPoll: number;
  healthArriving: ReturnType<HealthProbe['figures']>;
  healthHeld: ReturnType<HealthProbe['figures']>;
  healthFailures: number;
  arrivalSeconds: number;
  answeredEarly: number;
  releaseMs: number;
  otherCores: number;
}

/**
 * Opens `count` polls with `wait=25` on the target, each on its own socket (in waves of WAVE, the
 * next once the server holds all but a wave of those opened), reads its memory after a GC once a
 * fifth are held and once all are (memory per poll is the slope between the two), and samples
 * `/health` while they arrive (the memory readings left out) and while they are held. Then closes
 * every client socket and waits until the server holds none.
 */
async function hold(target: Target, count: number, tokens: string[], counters: Counters): Promise<HoldFigures> {
  const { server } = target;
  const machineAtStart = counters.machine();
  const holdStartedAt = performance.now();
  const agents = Array.from(
    { length: Math.ceil(count / SOCKETS_PER_ADDRESS) },
    () => new Agent({ keepAlive: false, maxSockets: Number.POSITIVE_INFINITY, localAddress: `127.0.0.${nextAddress++}` }),
  );
  const health = new HealthProbe(server.url);
  let opened = 0;
  let finished = 0;
  let answeredEarly = 0;
  let released = false;
  const requests: Array<Promise<void>> = [];
  const done = (answered: boolean) => {
    finished++;
    if (answered && !released) answeredEarly++;
  };
  const heldNow = async () => target.heldNow();
  /** Waits until the server holds `n` (less those already answered), up to `ms`; the last count read. */
  const waitForHeld = async (n: number, ms: number) => {
    const deadline = performance.now() + ms;
    let held = await heldNow();
    while (!(held + finished >= n) && performance.now() < deadline) {
      // A server that does not say: paced by time instead.
      if (Number.isNaN(held)) {
        await sleep(Math.min(200, deadline - performance.now()));
        return held;
      }
      await sleep(50);
      held = await heldNow();
    }
    return held;
  };
  const openUpTo = async (n: number) => {
    const deadline = performance.now() + 60_000;
    while (opened < n && performance.now() < deadline) {
      for (const end = Math.min(n, opened + WAVE); opened < end; opened++) {
        const i = opened;
        requests.push(
          httpCall(agents[i % agents.length]!, `${server.url}/v1/events?wait=${HELD_WAIT_SECONDS}`, { headers: bearer(tokens[i]!) }).then(
            () => done(true),
            () => done(false),
          ),
        );
      }
      await waitForHeld(opened - WAVE, 20_000);
    }
  };
  /** Memory after a GC, with the count held just before, `/health` left alone meanwhile. */
  let pausedMs = 0;
  const readMemory = async (): Promise<{ held: number; memory: ProbedMemory }> => {
    const t0 = performance.now();
    health.during(null);
    // Let the arrival's own work (reads, freed buffers) wind down first.
    await sleep(1_000);
    const held = await heldNow();
    const memory = await memoryAfterGc(server);
    pausedMs += performance.now() - t0;
    return { held, memory };
  };

  const firstOpenedAt = performance.now();
  health.during('arriving');
  const fifth = Math.floor(count / 5);
  await openUpTo(fifth);
  await waitForHeld(fifth, 15_000);
  const before = await readMemory();
  health.during('arriving');
  await openUpTo(count);
  const held = await waitForHeld(count, 20_000);
  // The pause for the first memory reading left out.
  const arrivalSeconds = (performance.now() - firstOpenedAt - pausedMs) / 1000;
  const after = await readMemory();
  // While all are held, until a little before the first ones' deadline.
  const heldFor = Math.min(HELD_SAMPLE_MS, firstOpenedAt + (HELD_WAIT_SECONDS - 2) * 1000 - performance.now());
  if (heldFor > 0) {
    health.during('held');
    await sleep(heldFor);
  }
  health.during(null);
  await health.stop();
  const otherCores = counters.otherCores(machineAtStart, counters.machine(), performance.now() - holdStartedAt);

  released = true;
  const releasedAt = performance.now();
  for (const agent of agents) agent.destroy();
  const deadline = performance.now() + 30_000;
  while ((await heldNow()) > 0 && performance.now() < deadline) await sleep(50);
  const releaseMs = performance.now() - releasedAt;
  await Promise.race([Promise.all(requests), sleep(30_000)]);

  const added = Math.max(1, after.held - before.held);
  const resident = (m: ProbedMemory) => m.anonymous - m.youngGeneration;
  const perPoll = {
    kibPerRequest: (resident(after.memory) - resident(before.memory)) / 1024 / added,
    heapKibPerRequest: (after.memory.heapUsed + after.memory.external - before.memory.heapUsed - before.memory.external) / 1024 / added,
  };
  return {
    held: Number.isNaN(held) ? opened - answeredEarly : held,
    heapKibPerPoll: perPoll.heapKibPerRequest,
    kibPerPoll: residentKib(perPoll),
    rawKibPerPoll: perPoll.kibPerRequest,
    healthArriving: health.figures('arriving'),
    healthHeld: health.figures('held'),
    healthFailures: health.failed,
    arrivalSeconds,
    answeredEarly,
    releaseMs,
    otherCores,
  };
}

/** One `wait=0` poll per token, 32 at a time: the server has served each installation once. */
async function pollEachOnce(target: Target, tokens: string[]): Promise<void> {
  const agent = new Agent({ keepAlive: true, maxSockets: 32 });
  let next = 0;
  await Promise.all(
    Array.from({ length: 32 }, async () => {
      while (next < tokens.length) {
        const token = tokens[next++]!;
        const answer = await httpCall(agent, `${target.server.url}/v1/events?wait=0`, { headers: bearer(token) });
        if (answer.status !== 200) throw new Error(`${target.name}: a poll before holding answered ${answer.status}`);
      }
    }),
  );
  agent.destroy();
}

/** How many of the tokens (the first ones) each server has served: the wait=0 and cycle runs use the first INSTALLATIONS. */
const served = new Map<string, number>([
  ['broker', INSTALLATIONS],
  ['ideal', INSTALLATIONS],
]);

async function heldFigures(targets: Target[], count: number, tokens: string[], counters: Counters) {
  heading(
    `3. ${fmt.int(count)} held polls (wait=${HELD_WAIT_SECONDS}, one socket each, waves of ${WAVE}); memory after a compacting GC, ` +
      '/health from one more client',
  );
  note(
    `(every installation held has polled each server once before, wait=0, as in steady state where a client's polls come back every ${HELD_WAIT_SECONDS} s: the held polls measure waiting, not first lookups)`,
  );
  const figures: HoldFigures[] = [];
  const perKnown: Record<string, number | null> = {};
  for (const target of targets) {
    // What a server keeps per installation it has served (the broker: its token and queue
    // position), read as the JS heap after a GC before and after serving the new ones once.
    const newlyServed = count - (served.get(target.name) ?? 0);
    const before = await memoryAfterGc(target.server);
    await pollEachOnce(target, tokens.slice(0, count));
    served.set(target.name, Math.max(count, served.get(target.name) ?? 0));
    const after = await memoryAfterGc(target.server);
    perKnown[target.name] = newlyServed > 0 ? rounded((after.heapUsed - before.heapUsed) / 1024 / newlyServed, 2) : null;
    const f = await hold(target, count, tokens, counters);
    figures.push(f);
    const resident =
      f.kibPerPoll === null
        ? `resident not measurable (${fmt.kib(f.rawKibPerPoll)}: memory given back between the readings)`
        : `${fmt.kib(f.kibPerPoll)} anonymous RSS`;
    line(
      `${target.name}: ${fmt.int(f.held)} held (arrived in ${f.arrivalSeconds.toFixed(1)} s)`,
      `${fmt.kib(f.heapKibPerPoll)} JS heap, ${resident} per poll`,
      `/health arriving p50 ${fmt.ms(f.healthArriving.p50)}, p99 ${fmt.ms(f.healthArriving.p99)} (${f.healthArriving.samples})`,
      `held p50 ${fmt.ms(f.healthHeld.p50)}, p99 ${fmt.ms(f.healthHeld.p99)} (${f.healthHeld.samples})`,
      `sockets closed → none held ${fmt.ms(f.releaseMs)}`,
    );
    if (f.answeredEarly > 0) note(`  (${fmt.int(f.answeredEarly)} polls were answered before the release)`);
    if (f.healthFailures > 0) note(`  (${fmt.int(f.healthFailures)} /health calls failed)`);
    if (f.otherCores > 0.1) note(`  (other processes on this machine used ${f.otherCores.toFixed(2)} cores meanwhile: figures disturbed)`);
  }
  const [b, i] = figures as [HoldFigures, HoldFigures];
  const rssRatio = b.kibPerPoll !== null && i.kibPerPoll !== null ? b.kibPerPoll / i.kibPerPoll : null;
  line(
    'broker ÷ ideal per held poll',
    `resident ${rssRatio === null ? 'not measurable' : `${rssRatio.toFixed(1)}×`}`,
    `JS heap ${(b.heapKibPerPoll / i.heapKibPerPoll).toFixed(1)}×`,
    `/health p99 arriving ${(b.healthArriving.p99 / i.healthArriving.p99).toFixed(1)}×, held ${(b.healthHeld.p99 / i.healthHeld.p99).toFixed(1)}×`,
  );
  if (perKnown.broker != null) {
    line(
      'JS heap per installation first served (after a GC)',
      `broker ${fmt.kib(perKnown.broker)}`,
      `ideal ${perKnown.ideal == null ? '-' : fmt.kib(perKnown.ideal)} (it loads every token at start)`,
    );
  }
  return {
    held: b.held,
    kibPerKnownInstallation: perKnown.broker ?? null,
    idealHeld: i.held,
    kibPerPoll: b.kibPerPoll,
    idealKibPerPoll: i.kibPerPoll,
    rssRatio: rssRatio === null ? null : rounded(rssRatio),
    heapKibPerPoll: rounded(b.heapKibPerPoll),
    idealHeapKibPerPoll: rounded(i.heapKibPerPoll),
    heapRatio: rounded(b.heapKibPerPoll / i.heapKibPerPoll),
    healthP50ArrivingMs: rounded(b.healthArriving.p50),
    healthP99ArrivingMs: rounded(b.healthArriving.p99),
    idealHealthP50ArrivingMs: rounded(i.healthArriving.p50),
    idealHealthP99ArrivingMs: rounded(i.healthArriving.p99),
    healthP50HeldMs: rounded(b.healthHeld.p50),
    healthP99HeldMs: rounded(b.healthHeld.p99),
    idealHealthP50HeldMs: rounded(i.healthHeld.p50),
    idealHealthP99HeldMs: rounded(i.healthHeld.p99),
    arrivalSeconds: rounded(b.arrivalSeconds),
    idealArrivalSeconds: rounded(i.arrivalSeconds),
    answeredEarly: b.answeredEarly,
    idealAnsweredEarly: i.answeredEarly,
    releaseMs: rounded(b.releaseMs),
    idealReleaseMs: rounded(i.releaseMs),
    otherCores: rounded(b.otherCores),
    idealOtherCores: rounded(i.otherCores),
  };
}

// ---------------------------------------------------------------------------------------------

/**
 * The clean-up when this process is killed outright rather than cleaning up itself: tsx SIGKILLs a
 * script that has not taken a ^C within about 60 ms, as a busy load generator may not, and
 * Postgres runs in a process group of its own (no ^C reaches it). A detached shell waits for this
 * process to end; if the bench's folder is still there (the clean-up did not run), it stops the
 * servers still running their entry, then Postgres, then removes the folder.
 */
function watchdog(servers: Child[]): void {
  const dir = JSON.stringify(dataDir);
  const pids = servers.map((server) => `${server.process.pid}`).join(' ');
  const script = [
    `while kill -0 ${process.pid} 2>/dev/null; do sleep 1; done`,
    `[ -d ${dir} ] || exit 0`,
    `for p in ${pids}; do grep -qa -e src/main.ts -e idle-baseline.ts /proc/$p/cmdline 2>/dev/null && kill -TERM $p; done`,
    `pm=$(head -n 1 ${dir}/postgres/postmaster.pid 2>/dev/null)`,
    `if [ -n "$pm" ]; then kill -INT "$pm" 2>/dev/null; i=0; while kill -0 "$pm" 2>/dev/null && [ $i -lt 30 ]; do sleep 1; i=$((i+1)); done; fi`,
    `rm -rf ${dir}`,
  ].join('\n');
  spawn('sh', ['-c', script], { detached: true, stdio: 'ignore' }).unref();
}

/** The 1, 5 and 15 minute load averages. */
const loadText = () =>
  loadavg()
    .map((n) => n.toFixed(2))
    .join(', ');

/** This process's open-file limits (what `ulimit -n` shows to a shell it starts). */
function fileLimits(): { soft: number; hard: number } {
  const [soft, hard] = execFileSync('sh', ['-c', 'ulimit -Sn; ulimit -Hn'], { encoding: 'utf8' })
    .trim()
    .split('\n')
    .map((v) => (v.trim() === 'unlimited' ? Number.MAX_SAFE_INTEGER : Number(v)));
  return { soft: soft!, hard: hard! };
}

function canSetFileLimit(n: number): boolean {
  return spawnSync('sh', ['-c', `ulimit -n ${n}`], { stdio: 'ignore' }).status === 0;
}

// Last: the classes and constants above are initialised by now.
await run(main, { sayHowLong: false });
