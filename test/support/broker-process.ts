import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export interface StartOptions {
  timeoutMs?: number;
  via?: 'node' | 'npm';
  /** The checkout to start it from (a previous release's, see release-checkout.ts); this one by default. */
  cwd?: string;
}

/** A broker started the way `npm start` starts it, in its own process, on a free port. */
export interface BrokerProcess {
  readonly url: string;
  readonly child: ChildProcess;
  /** Everything it printed so far (stdout and stderr). */
  output(): string;
  /** SIGTERM and wait; resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** `npm start` in `options.via: 'npm'`: the process signalled is then npm's, as a process manager's would be. */
export async function startBroker(env: Record<string, string>, options: StartOptions = {}): Promise<BrokerProcess> {
  const [command, args] = options.via === 'npm' ? ['npm', ['start']] : [process.execPath, ['--import', 'tsx', 'src/main.ts']];
  const child = spawn(command as string, args as string[], {
    cwd: options.cwd ?? ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', PORT: '0', LOG_LEVEL: 'info', ...env },
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
