import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { type Agent, type IncomingHttpHeaders, request } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { signWebhook } from '../src/composio/webhook-signature.js';
import { freePort } from '../src/db/embedded.js';
import { composioUserIdFor } from '../src/installations/tokens.js';

/** Small tools for bench/events.ts: processes, HTTP on keep-alive sockets, figures. */

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export interface Child {
  readonly url: string;
  readonly process: ChildProcess;
  rssKiB(): number;
  stop(): Promise<void>;
}

/** How a child is started beside its entry point and environment. */
export interface ChildOptions {
  /** The child's stdout goes to /dev/null (a broker logging every request at `info` writes a lot); stderr is still kept. */
  discardStdout?: boolean;
  /** Its open-file limit (`ulimit -n`), for a server holding more sockets than the inherited limit allows. */
  fileLimit?: number;
}

/** Runs a TypeScript entry point in its own Node process and waits until `GET readyPath` answers 200. */
export async function startChild(
  entry: string,
  env: Record<string, string>,
  readyPath = '/health',
  options: ChildOptions = {},
): Promise<Child> {
  const port = await freePort();
  const node = [process.execPath, '--import', 'tsx', entry];
  // `exec`: the child's pid stays the Node process's own (its CPU time and memory are read by pid).
  const [command, ...args] =
    options.fileLimit === undefined ? node : ['sh', '-c', `ulimit -n ${Math.floor(options.fileLimit)} && exec "$0" "$@"`, ...node];
  const child = spawn(command!, args, {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', HOST: '127.0.0.1', PORT: String(port), ...env },
    stdio: ['ignore', options.discardStdout ? 'ignore' : 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output = (output + chunk.toString('utf8')).slice(-20_000)));
  child.stderr!.on('data', (chunk: Buffer) => (output = (output + chunk.toString('utf8')).slice(-20_000)));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${entry} exited with ${child.exitCode}:\n${output}`);
    if (Date.now() > deadline) {
      child.kill('SIGTERM');
      throw new Error(`${entry} did not start:\n${output}`);
    }
    const status = await fetch(`${url}${readyPath}`).then(
      (r) => r.status,
      () => 0,
    );
    if (status === 200) break;
    await sleep(100);
  }
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    url,
    process: child,
    rssKiB: () => rssKiB(child.pid!),
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

/** CPU time the child process has used so far (user + system), from /proc. */
export function cpuSeconds(child: Child): number {
  const stat = readFileSync(`/proc/${child.process.pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** The whole machine's busy processor time so far (every process, every core), in seconds, from /proc/stat. */
export function machineBusySeconds(): number {
  // cpu  user nice system idle iowait irq softirq steal …, in clock ticks.
  const ticks = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  return [0, 1, 2, 5, 6, 7].reduce((sum, i) => sum + (ticks[i] ?? 0), 0) / clockTicksPerSecond();
}

let ticksPerSecond: number | undefined;

/** The unit of /proc's processor times (`getconf CLK_TCK`). */
export function clockTicksPerSecond(): number {
  ticksPerSecond ??= Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
  return ticksPerSecond;
}

export function rssKiB(pid: number): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match ? Number(match[1]) : Number.NaN;
}

export interface HttpAnswer {
  status: number;
  body: string;
  headers: IncomingHttpHeaders;
}

export function httpCall(
  agent: Agent,
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent, method: options.method ?? 'GET', headers: options.headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8'), headers: res.headers }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(options.body);
  });
}

export interface LoadResult {
  readonly requests: number;
  readonly failures: number;
  readonly seconds: number;
  readonly latenciesMs: number[];
}

/**
 * `concurrency` workers each doing one call after another for `durationMs` (after `warmupMs`
 * not counted). `call` resolves true for a success.
 */
export async function runLoad(options: {
  concurrency: number;
  warmupMs: number;
  durationMs: number;
  call: () => Promise<boolean>;
}): Promise<LoadResult> {
  const start = performance.now();
  const measureFrom = start + options.warmupMs;
  const end = measureFrom + options.durationMs;
  const latenciesMs: number[] = [];
  let failures = 0;
  const worker = async () => {
    for (;;) {
      const t0 = performance.now();
      if (t0 >= end) return;
      const ok = await options.call().catch(() => false);
      const t1 = performance.now();
      if (t0 >= measureFrom && t1 <= end) {
        latenciesMs.push(t1 - t0);
        if (!ok) failures++;
      }
    }
  };
  await Promise.all(Array.from({ length: options.concurrency }, worker));
  return { requests: latenciesMs.length, failures, seconds: options.durationMs / 1000, latenciesMs };
}

export function percentile(values: number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** The middle value (the mean of the two middle ones for an even count): how paired rounds are summed up. */
export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** Rounded to `digits` decimals, for the JSON line a bench ends with. */
export const rounded = (n: number, digits = 2) => Math.round(n * 10 ** digits) / 10 ** digits;

export const fmt = {
  rate: (n: number) => `${Math.round(n).toLocaleString('en-US')}/s`,
  ms: (n: number) => `${n < 10 ? n.toFixed(2) : n.toFixed(1)} ms`,
  int: (n: number) => Math.round(n).toLocaleString('en-US'),
  kib: (n: number) => `${n.toFixed(1)} KiB`,
};

/** One line of the report: a label padded to a column, then the figures. */
export function line(label: string, ...figures: string[]): void {
  process.stdout.write(`  ${label.padEnd(58)} ${figures.join('   ')}\n`);
}

export function heading(text: string): void {
  process.stdout.write(`\n${text}\n`);
}

export function loadFigures(result: LoadResult): string[] {
  return [
    fmt.rate(result.requests / result.seconds).padStart(9),
    `p50 ${fmt.ms(percentile(result.latenciesMs, 50))}`,
    `p99 ${fmt.ms(percentile(result.latenciesMs, 99))}`,
    ...(result.failures > 0 ? [`(${result.failures} failed)`] : []),
  ];
}

/**
 * A bench's run: a temporary folder (`dataDir`) and the clean-ups it registers (`cleanups`), run
 * in reverse whether the bench ends, fails or is interrupted (SIGINT/SIGTERM/SIGHUP, or its output
 * closed by the reader, stop the brokers and Postgres it started before leaving). `run(main)` runs the bench, then the clean-ups, and with
 * `sayHowLong` prints how long it all took.
 */
export async function benchRun(prefix: string) {
  const startedAt = performance.now();
  const dataDir = await mkdtemp(path.join(tmpdir(), prefix));
  const cleanups: Array<() => Promise<unknown>> = [() => rm(dataDir, { recursive: true, force: true })];
  // One clean-up, however many ask for it: a bench failing because a signal's clean-up stopped its
  // servers waits for that clean-up to finish rather than leaving before Postgres is stopped.
  let cleaning: Promise<void> | undefined;
  const cleanUp = () =>
    (cleaning ??= (async () => {
      for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
    })());
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(signal, () => void cleanUp().finally(() => process.exit(130)));
  }
  // Output piped into a reader that stops early (`| head`): without this the write error would end
  // the process at once, leaving its Postgres (a process group of its own) running.
  process.stdout.once('error', () => void cleanUp().finally(() => process.exit(141)));
  return {
    startedAt,
    dataDir,
    cleanups,
    async run(main: () => Promise<void>, options: { sayHowLong: boolean } = { sayHowLong: true }): Promise<void> {
      try {
        await main();
      } finally {
        await cleanUp();
      }
      if (options.sayHowLong) process.stdout.write(`\n(${((performance.now() - startedAt) / 1000).toFixed(0)} s in all)\n`);
    },
  };
}

/** Whose trigger a Composio trigger message is for, as its `metadata` names it. */
export interface MessageTarget {
  readonly triggerSlug: string;
  readonly triggerId: string;
  readonly connectedAccountId: string;
  readonly authConfigId: string;
  readonly userId: string;
}

/** A `composio.trigger.message` delivery (V3) as Composio posts it. */
export function triggerMessageBody(id: string, target: MessageTarget, data: unknown): string {
  return JSON.stringify({
    id,
    timestamp: new Date().toISOString(),
    type: 'composio.trigger.message',
    metadata: {
      log_id: `log_${id}`,
      trigger_slug: target.triggerSlug,
      trigger_id: target.triggerId,
      connected_account_id: target.connectedAccountId,
      auth_config_id: target.authConfigId,
      user_id: target.userId,
    },
    data,
  });
}

/** The headers of one delivery attempt of `body`, signed now (each attempt has its own timestamp, as Composio's do). */
export function signedHeaders(id: string, body: string, secret: string): Record<string, string> {
  const timestamp = Math.floor(Date.now() / 1000);
  return {
    'content-type': 'application/json',
    'webhook-id': id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': signWebhook({ id, timestamp, body, secret }),
  };
}

/**
 * A GitHub issue opened (about 1 KB, as Composio would post it) for the installation's trigger,
 * signed with `secret`: the webhook bench:events and bench:scale post. `bench` names their
 * connected account and auth config (`ca_<bench>`, `ac_<bench>`).
 */
export function issueWebhook(
  installation: { installationId: string; composioTriggerId: string },
  secret: string,
  bench: string,
): { headers: Record<string, string>; body: string } {
  const id = `msg_${randomUUID()}`;
  const target = {
    triggerSlug: 'GITHUB_ISSUE_ADDED_EVENT',
    triggerId: installation.composioTriggerId,
    connectedAccountId: `ca_${bench}`,
    authConfigId: `ac_${bench}`,
    userId: composioUserIdFor(installation.installationId),
  };
  const body = triggerMessageBody(id, target, {
    action: 'opened',
    issue: { number: 4242, title: 'Crash when the window is resized twice', body: 'x'.repeat(600), labels: ['bug', 'p1'] },
    repository: { full_name: 'openmausbot/desktop' },
    sender: { login: 'octocat' },
  });
  return { body, headers: signedHeaders(id, body, secret) };
}

/** Lets the bench read a process's memory after a full garbage collection (bench/memory-probe.mjs): its `NODE_OPTIONS`. */
export const MEMORY_PROBE = `--expose-gc --import ${path.join(ROOT, 'bench/memory-probe.mjs')}`;

/** What bench/memory-probe.mjs reports, in bytes. */
export interface ProbedMemory extends NodeJS.MemoryUsage {
  /** Anonymous resident memory (`RssAnon`). */
  anonymous: number;
  /** The young generation's size, part of `anonymous`. */
  youngGeneration: number;
}

/** The process's memory right after a full, compacting garbage collection, as bench/memory-probe.mjs reports it. */
export async function memoryAfterGc(child: Child): Promise<ProbedMemory> {
  const stderr = child.process.stderr!;
  const report = new Promise<ProbedMemory>((resolve, reject) => {
    let text = '';
    const timer = setTimeout(() => {
      stderr.off('data', onData);
      reject(new Error('the process did not report its memory (bench/memory-probe.mjs)'));
    }, 10_000);
    const onData = (chunk: Buffer) => {
      text += chunk.toString('utf8');
      const match = /omb-memory (\{.*\})\n/.exec(text);
      if (!match) return;
      clearTimeout(timer);
      stderr.off('data', onData);
      resolve(JSON.parse(match[1]!) as ProbedMemory);
    };
    stderr.on('data', onData);
  });
  child.process.kill('SIGWINCH');
  return report;
}

/**
 * Resident memory per held request, or null when it is not a measure of the requests: less than
 * the JS heap they added means the process gave back memory it held for something else between
 * the two readings (the allocator returning what the compiler or the collector's threads had
 * used), which happens in some runs and would land on either side.
 */
export function residentKib(figures: { kibPerRequest: number; heapKibPerRequest: number }): number | null {
  return figures.kibPerRequest < figures.heapKibPerRequest ? null : rounded(figures.kibPerRequest);
}

/**
 * What the benches start a broker with: their own Postgres, a Composio nobody answers (no bench
 * calls it), their webhook secret, quotas no bench reaches, and their metrics token.
 */
export function benchBrokerEnv(databaseUrl: string, webhookSecret: string, metricsToken: string): Record<string, string> {
  return {
    DATABASE_URL: databaseUrl,
    COMPOSIO_API_KEY: 'ak_bench',
    COMPOSIO_BASE_URL: 'http://127.0.0.1:9',
    COMPOSIO_WEBHOOK_SECRET: webhookSecret,
    QUOTA_STANDARD: '10000000',
    QUOTA_PAID: '10000000',
    METRICS_TOKEN: metricsToken,
  };
}
