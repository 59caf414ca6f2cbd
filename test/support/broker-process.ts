import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { inject } from 'vitest';
import { TEST_DATA_KEYS } from './data-keys.js';
import { BUILD_RESULT } from './global-build.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** Generous: on a crowded machine the run's build can take many times its second or so. */
const BUILD_WAIT_MS = 180_000;

export interface StartOptions {
  timeoutMs?: number;
  /**
   * - `node` (the default): `node dist/main.js`, the run's compiled broker (global-build.ts), as the
   *   image runs it, or the `dist/` of the checkout `cwd` names (release-checkout.ts builds it);
   *   from the source through tsx when the run has no build (a file run outside the processes
   *   project);
   * - `npm`: `npm start`, for tests about `npm start` itself;
   * - `tsx`: from the source through tsx (`node --import tsx src/main.ts`) whatever the run built.
   */
  via?: 'node' | 'npm' | 'tsx';
  /** The checkout to start it from (a previous release's, see release-checkout.ts); this one by default. */
  cwd?: string;
}

/** A broker in its own process, on a free port (see `StartOptions.via` for how it is started). */
export interface BrokerProcess {
  readonly url: string;
  readonly child: ChildProcess;
  /** Everything it printed so far (stdout and stderr). */
  output(): string;
  /** SIGTERM and wait; resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Under `options.via: 'npm'` the process signalled is npm's, as a process manager's would be. */
export async function startBroker(env: Record<string, string>, options: StartOptions = {}): Promise<BrokerProcess> {
  const [command, args]: [string, string[]] =
    options.via === 'npm'
      ? ['npm', ['start']]
      : [process.execPath, options.via === 'tsx' ? fromSource('main') : options.cwd ? ['dist/main.js'] : await nodeArguments('main')];
  const child = spawn(command, args, {
    cwd: options.cwd ?? ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '/tmp',
      PORT: '0',
      LOG_LEVEL: 'info',
      DATA_ENCRYPTION_KEYS: TEST_DATA_KEYS,
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));

  const url = await new Promise<string>((resolve, reject) => {
    // Generous: a first start initialises an embedded Postgres, slow on a busy machine.
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      // Stopped politely, so it stops the embedded Postgres it may have started; never left running.
      void stopChild(child, exited).then(() => reject(new Error(`broker did not start in time:\n${output}`)));
    }, options.timeoutMs ?? 40_000);
    const check = () => {
      const match = /"url":"(http:\/\/[^"]+)","database"[^\n]*"msg":"broker listening"/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]!);
      }
    };
    child.stdout!.on('data', check);
    void exited.then((code) => {
      clearTimeout(timer);
      if (!timedOut) reject(new Error(`broker exited with ${code} before listening:\n${output}`));
    });
  });

  return {
    url,
    child,
    output: () => output,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

async function stopChild(child: ChildProcess, exited: Promise<number | null>): Promise<void> {
  child.kill('SIGTERM');
  const stopped = await Promise.race([exited.then(() => true), new Promise((resolve) => setTimeout(resolve, 10_000, false))]);
  if (!stopped) child.kill('SIGKILL');
}

/**
 * The arguments after `node` that run one of the broker's entry points (`main`, `operators/cli`),
 * from the directory of this checkout: the run's compiled file when the run built one, otherwise
 * the source through tsx. Rejects when the run's build failed, with tsc's words.
 */
export async function nodeArguments(entry: 'main' | 'operators/cli'): Promise<string[]> {
  const dir = await runBuild();
  return dir ? [path.join(dir, 'dist', `${entry}.js`)] : fromSource(entry);
}

function fromSource(entry: string): string[] {
  return ['--import', 'tsx', `src/${entry}.ts`];
}

let build: Promise<string | undefined> | undefined;

/** The folder of the run's compiled broker once built; undefined when the run has none. */
function runBuild(): Promise<string | undefined> {
  build ??= awaitBuild();
  return build;
}

async function awaitBuild(): Promise<string | undefined> {
  let dir: string | undefined;
  try {
    dir = inject('brokerBuild');
  } catch {
    // Not in a Vitest worker (a bench script starting brokers): there is no build.
    return undefined;
  }
  if (!dir) return undefined;
  const file = path.join(dir, BUILD_RESULT);
  const deadline = Date.now() + BUILD_WAIT_MS;
  while (!existsSync(file)) {
    if (Date.now() > deadline) throw new Error(`the run's build of the broker did not end within ${BUILD_WAIT_MS / 1000} s (${dir})`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const result = JSON.parse(readFileSync(file, 'utf8')) as { ok: boolean; output?: string };
  if (!result.ok) throw new Error(`the run's build of the broker failed:\n${result.output}`);
  return dir;
}
