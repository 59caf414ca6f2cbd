import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { rename } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Simulator, startSimulator } from '../../src/sim/index.js';
import { type BrokerProcess, nodeArguments, startBroker } from '../support/broker-process.js';
import { type DataFolders, prepareDataFolders } from '../support/data-folder.js';
import { registerOver, until } from '../support/http.js';

/**
 * The broker's life as a process on a data folder of its own (embedded Postgres): a second
 * broker on the same folder is refused and harms nothing; `npm start`'s pid stops everything;
 * an embedded Postgres that dies is started again. Each broker gets a folder of its own, a copy of
 * one initialised once (see data-folder.ts), except where the folder must be fresh.
 *
 * The tests run at once (each broker on its folder, apart from the others'), as most of each one
 * is a broker starting or stopping; at most START_AT_ONCE brokers start at a time, so that a
 * start, mostly loading the broker's modules, is never starved of the processor.
 */

const ROOT = path.resolve(import.meta.dirname, '../..');
let sim: Simulator;
let folders: DataFolders;
/** The Ctrl-C test's own simulator: it counts the requests reaching it, which other brokers' would disturb. */
let ctrlCSim: Simulator;
const cleanups: Array<() => Promise<unknown>> = [];
/** See the last test: started with the file, as it spends seconds waiting on the broker. */
let lostForGood: Promise<LostForGood> | undefined;

beforeAll(async () => {
  [sim, ctrlCSim, folders] = await Promise.all([
    startSimulator({ apiKey: 'sim_lifecycle_key', logger: false }),
    startSimulator({ apiKey: 'sim_lifecycle_ctrl_c_key', logger: false }),
    prepareDataFolders('omb-lifecycle-'),
  ]);
  lostForGood = postgresLostForGood();
  // Awaited by its test; this only keeps a failure before then from counting as unhandled.
  lostForGood.catch(() => undefined);
}, 60_000);
afterAll(async () => {
  await lostForGood?.catch(() => undefined);
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
  await Promise.all([sim?.close(), ctrlCSim?.close()]);
  await folders?.remove();
}, 60_000);

const env = (dataDir: string, composio: Simulator = sim): Record<string, string> => ({
  DATA_DIR: dataDir,
  COMPOSIO_API_KEY: composio.apiKey,
  COMPOSIO_BASE_URL: composio.origin,
  COMPOSIO_WEBHOOK_SECRET: 'whsec_lifecycle_tests',
  SHUTDOWN_GRACE_MS: '3000',
});

const START_AT_ONCE = 2;
/** How long a start may take: the tests run at once, so a start may wait on the others' for the processor. */
const START_TIMEOUT_MS = 90_000;
let startsUnderWay = 0;
const startQueue: Array<() => void> = [];

/** Runs `starting` (a broker's start, up to listening) once fewer than START_AT_ONCE others are under way. */
async function oneOfFewStarts<T>(starting: () => Promise<T>): Promise<T> {
  // A start that ends hands its turn to the next one waiting.
  if (startsUnderWay < START_AT_ONCE) startsUnderWay += 1;
  else await new Promise<void>((resolve) => startQueue.push(resolve));
  try {
    return await starting();
  } finally {
    const next = startQueue.shift();
    if (next) next();
    else startsUnderWay -= 1;
  }
}

async function start(dataDir: string, via: 'node' | 'npm' = 'node', extraEnv: Record<string, string> = {}): Promise<BrokerProcess> {
  const broker = await oneOfFewStarts(() => startBroker({ ...env(dataDir), ...extraEnv }, { via, timeoutMs: START_TIMEOUT_MS }));
  cleanups.push(() => broker.stop('SIGKILL'));
  return broker;
}

/** The broker's own pid, from its log (under `npm start` the child's pid is not npm's). */
function brokerPid(broker: BrokerProcess): number {
  const match = /"pid":(\d+)[^\n]*"msg":"broker listening"/.exec(broker.output());
  if (!match) throw new Error('no pid in the log');
  return Number(match[1]);
}

function postmasterPid(dataDir: string): number | null {
  const file = path.join(dataDir, 'postgres', 'postmaster.pid');
  if (!existsSync(file)) return null;
  return Number.parseInt(readFileSync(file, 'utf8').split('\n')[0] ?? '', 10);
}

/** The pid of a new server in the folder once one runs (the previous one's postmaster.pid stays until then). */
async function postmasterAfter(dataDir: string, previous: number): Promise<number> {
  let pid: number | null = null;
  await until(
    () => {
      pid = postmasterPid(dataDir);
      return pid !== null && pid !== previous && alive(pid);
    },
    30_000,
    `a Postgres in ${dataDir} other than ${previous}`,
  );
  return pid!;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Runs the broker to its end: for one that must refuse to start. */
async function run(dataDir: string): Promise<{ child: ChildProcess; done: Promise<{ code: number | null; output: string }> }> {
  const child = spawn(process.execPath, await nodeArguments('main'), {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', PORT: '0', LOG_LEVEL: 'info', ...env(dataDir) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  cleanups.push(async () => child.kill('SIGKILL'));
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  return { child, done: new Promise((resolve) => child.once('exit', (code) => resolve({ code, output }))) };
}

/** Alive and not a zombie (an orphan that exited may wait for a parent that never reaps it). */
function running(pid: number): boolean {
  if (!alive(pid)) return false;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

async function healthy(url: string): Promise<boolean> {
  try {
    return (await fetch(`${url}/health`)).status === 200;
  } catch {
    return false;
  }
}

describe.concurrent('one broker per data folder', () => {
  it('refuses a second broker on a folder in use with exit 78, naming the folder and the pid; the first keeps serving', async () => {
    const dataDir = await folders.copy();
    const first = await start(dataDir);
    const postgresBefore = postmasterPid(dataDir);
    expect(postgresBefore).not.toBeNull();

    const second = await (await run(dataDir)).done;
    expect(second.code).toBe(78);
    expect(second.output).toContain(`the data folder ${path.resolve(dataDir)} is in use by a running broker (pid ${brokerPid(first)})`);
    expect(second.output).not.toContain('stopping an embedded Postgres left running');

    // The first broker's Postgres was not touched, and it keeps serving.
    expect(postmasterPid(dataDir)).toBe(postgresBefore);
    expect(alive(postgresBefore!)).toBe(true);
    expect(await healthy(first.url)).toBe(true);
    const who = await registerOver(first.url);
    expect((await fetch(`${first.url}/v1/me`, { headers: who.auth })).status).toBe(200);

    expect(await first.stop()).toBe(0);
    expect(postmasterPid(dataDir)).toBeNull();
    expect(existsSync(path.join(dataDir, 'broker.pid')), 'the lock released').toBe(false);
  }, 120_000);

  it('lets exactly one of two brokers started at once on a fresh folder run', async () => {
    const dataDir = await folders.empty();
    // Both spawned in the same moment (the arguments are known before either starts).
    const [a, b] = await Promise.all([run(dataDir), run(dataDir)]);
    const listening = (output: string) => /"msg":"broker listening"/.test(output);
    let outA = '';
    let outB = '';
    a.child.stdout!.on('data', (c: Buffer) => (outA += c.toString()));
    b.child.stdout!.on('data', (c: Buffer) => (outB += c.toString()));
    // One of them refuses (78) at once; the other goes on to listen.
    const refused = await Promise.race([a.done.then((r) => ({ r, winner: b })), b.done.then((r) => ({ r, winner: a }))]);
    expect(refused.r.code).toBe(78);
    expect(refused.r.output).toContain('is in use by a running broker');
    const winnerOut = refused.winner === a ? () => outA : () => outB;
    await until(() => listening(winnerOut()), START_TIMEOUT_MS, 'the other broker listening');
    refused.winner.child.kill('SIGTERM');
    expect((await refused.winner.done).code).toBe(0);
    expect(postmasterPid(dataDir)).toBeNull();
  }, 120_000);

  it('still recovers the folder of a broker killed with SIGKILL, whose Postgres it left running', async () => {
    const dataDir = await folders.copy();
    const first = await start(dataDir);
    const who = await registerOver(first.url);
    const orphan = postmasterPid(dataDir)!;
    await first.stop('SIGKILL');
    expect(alive(orphan), 'its Postgres outlives it').toBe(true);

    const second = await start(dataDir);
    expect(second.output()).toContain('stopping an embedded Postgres left running by an earlier broker');
    expect(alive(orphan)).toBe(false);
    expect(await healthy(second.url)).toBe(true);
    expect((await fetch(`${second.url}/v1/me`, { headers: who.auth })).status).toBe(200);
    expect(await second.stop()).toBe(0);
    expect(postmasterPid(dataDir)).toBeNull();
  }, 120_000);
});

describe.concurrent('npm start', () => {
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    it(`stops everything on ${signal} to the pid of npm start: polls answered, Postgres stopped, exit 0`, async () => {
      const dataDir = await folders.copy();
      const broker = await start(dataDir, 'npm');
      const pid = brokerPid(broker);
      expect(pid).not.toBe(broker.child.pid);
      const postgres = postmasterPid(dataDir)!;
      const who = await registerOver(broker.url);
      const poll = fetch(`${broker.url}/v1/events?wait=25`, { headers: who.auth }).then(async (r) => ({
        status: r.status,
        body: await r.json(),
      }));
      await new Promise((resolve) => setTimeout(resolve, 300));

      const signalledAt = performance.now();
      broker.child.kill(signal);
      // As Ctrl-C in a terminal or a signal to the process group does: the broker gets the signal
      // itself too, besides npm relaying it.
      process.kill(pid, signal);
      // A machine's shutdown signals every process, the embedded Postgres too (a smart shutdown):
      // that is left to the broker's own stop, which ends it, and nothing starts it again.
      if (signal === 'SIGTERM') process.kill(postgres, 'SIGTERM');
      expect(await poll).toEqual({ status: 200, body: { events: [], cursor: expect.any(String) } });
      const code = await new Promise((resolve) => {
        if (broker.child.exitCode !== null) resolve(broker.child.exitCode);
        else broker.child.once('exit', resolve);
      });
      expect(code, broker.output()).toBe(0);
      expect(performance.now() - signalledAt).toBeLessThan(10_000);
      expect(alive(pid), 'the broker process is gone').toBe(false);
      expect(alive(postgres), 'its Postgres is gone').toBe(false);
      expect(postmasterPid(dataDir), 'postmaster.pid removed').toBeNull();
      expect(broker.output()).toContain('"msg":"embedded Postgres stopped"');
      // Postgres may see its signal before the broker sees its own, and say it waits (a warning
      // that names what happens unless the broker stops); nothing starts it again either way.
      expect(broker.output()).not.toMatch(/"msg":"embedded Postgres (shut down as it was asked|exited unexpectedly); starting it again"/);
    }, 120_000);
  }
});

describe.concurrent('Ctrl-C in a terminal', () => {
  it('SIGINT to the whole process group of npm start leaves the embedded Postgres to the broker', async () => {
    const dataDir = await folders.copy();
    let output = '';
    const { child, exited } = await oneOfFewStarts(async () => {
      // A terminal's foreground job: npm, the broker and whatever they spawn share one process group.
      const child = spawn('npm', ['start'], {
        cwd: ROOT,
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', PORT: '0', LOG_LEVEL: 'info', ...env(dataDir, ctrlCSim) },
        stdio: ['ignore', 'pipe', 'pipe'],
        detached: true,
      });
      cleanups.push(async () => child.kill('SIGKILL'));
      child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
      child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      await until(() => /"msg":"broker listening"/.test(output), START_TIMEOUT_MS, 'the broker listening');
      return { child, exited };
    });
    const pid = Number(/"pid":(\d+)[^\n]*"msg":"broker listening"/.exec(output)![1]);
    cleanups.push(async () => process.kill(pid, 'SIGKILL'));
    const postgres = postmasterPid(dataDir)!;
    const url = /"url":"(http:\/\/[^"]+)","database"/.exec(output)![1]!;
    const who = await registerOver(url);
    // A request still under way when Ctrl-C comes: Composio answers it 1.5 s later.
    const since = ctrlCSim.controls.requests().length;
    ctrlCSim.controls.injectFault({ delayMs: 1500, path: '/api/v3.1/connected_accounts', method: 'GET', times: 1 });
    const slow = fetch(`${url}/v1/connectors/connected`, { headers: who.auth }).then((r) => r.status);
    await until(() => ctrlCSim.controls.requests().length > since, 10_000, 'the slow Composio call under way');

    process.kill(-child.pid!, 'SIGINT');
    expect(await slow).toBe(200);
    expect(await exited, output).toBe(0);
    await until(() => !running(pid), 10_000, 'the broker gone');
    expect(alive(postgres), 'its Postgres is gone').toBe(false);
    expect(postmasterPid(dataDir), 'postmaster.pid removed').toBeNull();
    // The database stays up until the broker has finished with it: Ctrl-C must not reach Postgres.
    expect(output).not.toContain('exited unexpectedly');
    expect(output).toContain('"msg":"embedded Postgres stopped"');
  }, 120_000);
});

describe.concurrent('npm killed outright', () => {
  it('the broker notices it was orphaned and shuts down gracefully, Postgres included', async () => {
    const dataDir = await folders.copy();
    const broker = await start(dataDir, 'npm');
    const pid = brokerPid(broker);
    const postgres = postmasterPid(dataDir)!;
    broker.child.kill('SIGKILL');
    await until(() => !running(pid), 15_000, 'the orphaned broker gone');
    expect(alive(postgres), 'its Postgres is gone').toBe(false);
    expect(postmasterPid(dataDir), 'postmaster.pid removed').toBeNull();
    expect(broker.output()).toContain('the process that started the broker is gone; shutting down');
    expect(broker.output()).toContain('"msg":"embedded Postgres stopped"');
  }, 120_000);
});

describe.concurrent('the embedded Postgres dies', () => {
  it('is started again, as after a smart shutdown asked by someone else; the broker serves again, and SIGTERM still stops it promptly with exit 0', async () => {
    const dataDir = await folders.copy();
    const broker = await start(dataDir);
    const who = await registerOver(broker.url);
    const first = postmasterPid(dataDir)!;
    process.kill(first, 'SIGKILL');

    const second = await postmasterAfter(dataDir, first);
    await until(async () => healthy(broker.url), 15_000, 'the broker healthy again');
    expect((await fetch(`${broker.url}/v1/me`, { headers: who.auth })).status).toBe(200);
    expect(broker.output()).toContain('embedded Postgres exited unexpectedly; starting it again');

    // A smart shutdown asked by someone else (SIGTERM to the server alone) would wait for the
    // broker's sessions, which never all end: the broker ends it and starts the server again.
    process.kill(second, 'SIGTERM');
    const third = await postmasterAfter(dataDir, second);
    await until(async () => healthy(broker.url), 15_000, 'the broker healthy again after the smart shutdown');
    expect((await fetch(`${broker.url}/v1/me`, { headers: who.auth })).status).toBe(200);
    expect(broker.output()).toContain('embedded Postgres was asked to shut down by someone else');
    expect(broker.output()).toContain('embedded Postgres shut down as it was asked; starting it again');
    expect(alive(second)).toBe(false);

    const signalledAt = performance.now();
    expect(await broker.stop()).toBe(0);
    expect(performance.now() - signalledAt).toBeLessThan(8000);
    expect(postmasterPid(dataDir)).toBeNull();
    expect(alive(third)).toBe(false);
  }, 120_000);

  it('exits 1 for a supervisor when it cannot be started again', async () => {
    const { code, output, lockLeft } = await lostForGood!;
    expect(code).toBe(1);
    expect(output).toContain('embedded Postgres could not be started again');
    // Every try the window allows was made: 0.25, 0.75, 1.75 and 2 s after it died.
    expect(output.match(/embedded Postgres did not start again yet/g)?.length).toBe(4);
    expect(output).toContain('shutting down: the embedded Postgres is gone');
    expect(lockLeft, 'the lock released').toBe(false);
  }, 120_000);
});

interface LostForGood {
  code: number | null;
  output: string;
  lockLeft: boolean;
}

/**
 * A broker whose embedded Postgres dies and cannot be started again, run to its end. The broker
 * tries again for EMBEDDED_POSTGRES_RESTART_MS (half a minute by default; 2 s here, four tries),
 * idle between tries; so this starts with the file and runs while the tests before its own do,
 * and its test checks the outcome.
 */
async function postgresLostForGood(): Promise<LostForGood> {
  const dataDir = await folders.copy();
  const broker = await start(dataDir, 'node', { EMBEDDED_POSTGRES_RESTART_MS: '2000' });
  const exited = new Promise<number | null>((resolve) => broker.child.once('exit', resolve));
  const postgres = postmasterPid(dataDir)!;
  // Its folder gone with it: no attempt to start it again can succeed.
  process.kill(postgres, 'SIGKILL');
  await rename(path.join(dataDir, 'postgres'), path.join(dataDir, 'postgres-moved'));
  const code = await exited;
  return { code, output: broker.output(), lockLeft: existsSync(path.join(dataDir, 'broker.pid')) };
}
