import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { chmod, chown, cp, mkdir, mkdtemp, readFile, rm, symlink } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dataFolderParent } from '../support/data-folder.js';
import { TEST_DATA_KEYS } from '../support/data-keys.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

/**
 * The compiled broker run the way the Dockerfile runs it — `node dist/main.js` and
 * `node dist/operators/cli.js` from a folder laid out like the image's /app (dist/, migrations/,
 * openapi.yaml, package.json, node_modules), with NODE_ENV=production, as a user who is not root
 * (`nobody` when the tests run as root, as in CI; the current user otherwise).
 * The build is the image's own: `npm run build` (scripts/build.ts), into that folder.
 */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const NOBODY = 65534;
const asRoot = process.getuid?.() === 0;

let work: string;
let app: string;
let database: TestDatabase;

beforeAll(async () => {
  // In memory when there is room (see data-folder.ts): the embedded Postgres's folder is in here.
  work = await mkdtemp(path.join(await dataFolderParent(), 'omb-image-'));
  app = path.join(work, 'app');
  await mkdir(app);
  const built = (async () => {
    // `npm run build`, into the image-like folder instead of ./dist.
    await promisify(execFile)('npm', ['run', 'build', '--', '--outdir', path.join(app, 'dist')], { cwd: ROOT });
    await cp(path.join(ROOT, 'migrations'), path.join(app, 'migrations'), { recursive: true });
    for (const file of ['package.json', 'package-lock.json', 'openapi.yaml']) await cp(path.join(ROOT, file), path.join(app, file));
    await symlink(path.join(ROOT, 'node_modules'), path.join(app, 'node_modules'));
    await chmodTree(work);
  })();
  const created = createTestDatabase();
  // Both settled before either failure is reported, so that afterAll finds what was made.
  const [build, made] = await Promise.allSettled([built, created]);
  if (made.status === 'fulfilled') database = made.value;
  if (build.status === 'rejected') throw build.reason;
  if (made.status === 'rejected') throw made.reason;
}, 240_000);

afterAll(async () => {
  await database?.drop();
  if (work) await rm(work, { recursive: true, force: true });
});

/** Readable by everyone, as files in an image are; the folder itself stays root's. */
async function chmodTree(dir: string): Promise<void> {
  await promisify(execFile)('chmod', ['-R', 'a+rX', dir]);
}

/** A folder the unprivileged user owns (the image's /data volume). */
async function ownedFolder(name: string): Promise<string> {
  const dir = path.join(work, name);
  await mkdir(dir);
  if (asRoot) await chown(dir, NOBODY, NOBODY);
  return dir;
}

/** The command line that runs `node …` as the unprivileged user. */
function unprivileged(args: string[]): [string, string[]] {
  if (!asRoot) return [process.execPath, args];
  return ['setpriv', [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', process.execPath, ...args]];
}

/** The image's environment: production (with its data keys), listening on loopback here, nothing else inherited. */
function imageEnv(env: Record<string, string>): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: '/tmp',
    NODE_ENV: 'production',
    HOST: '127.0.0.1',
    PORT: '0',
    DATA_ENCRYPTION_KEYS: TEST_DATA_KEYS,
    ...env,
  };
}

async function run(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  const [command, argv] = unprivileged(args);
  return new Promise((resolve) => {
    execFile(command, argv, { cwd: app, env: imageEnv(env), timeout: 120_000 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

interface Started {
  child: ChildProcess;
  url: Promise<string>;
  exited: Promise<number | null>;
  output(): string;
}

function startMain(env: Record<string, string>): Started {
  const [command, argv] = unprivileged(['dist/main.js']);
  const child = spawn(command, argv, { cwd: app, env: imageEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const url = new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`dist/main.js did not listen in time:\n${output}`)), 120_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString('utf8');
      const match = /"url":"(http:\/\/[^"]+)","database"[^\n]*"msg":"broker listening"/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]!);
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`dist/main.js exited with ${code}:\n${output}`));
    });
  });
  url.catch(() => {});
  return { child, url, exited, output: () => output };
}

async function stop(started: Started): Promise<number | null> {
  if (started.child.exitCode === null && started.child.signalCode === null) started.child.kill('SIGTERM');
  const timer = setTimeout(() => started.child.kill('SIGKILL'), 45_000);
  try {
    return await started.exited;
  } finally {
    clearTimeout(timer);
  }
}

/** Its exit code, or — still running after `ms` — it is stopped and `'running'` answered. */
async function exitWithin(started: Started, ms: number): Promise<number | null | 'running'> {
  const verdict = await Promise.race([started.exited, new Promise<'running'>((resolve) => setTimeout(resolve, ms, 'running'))]);
  if (verdict === 'running') await stop(started);
  return verdict;
}

/** The real uid of a running process, from /proc. */
async function uidOf(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/^Uid:\s+(\d+)/m.exec(status)![1]);
}

describe('the built entry points, run as the image runs them', () => {
  it('prints the CLI’s help, and a group’s, as a non-root user', async () => {
    const [help, keys] = await Promise.all([run(['dist/operators/cli.js', '--help']), run(['dist/operators/cli.js', 'keys', '--help'])]);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('keys generate');
    expect(help.stdout).toContain('migrate');
    expect(keys.code).toBe(0);
    expect(keys.stdout).toContain('keys generate');
  });

  it('migrates with the CLI and serves /health from dist/main.js on a database, as a non-root user', async () => {
    const migrate = await run(['dist/operators/cli.js', 'migrate'], { DATABASE_URL: database.url });
    expect(migrate.stderr).toBe('');
    expect(migrate.code).toBe(0);

    const broker = startMain({ DATABASE_URL: database.url, SANDBOX: 'true' });
    try {
      const url = await broker.url;
      if (asRoot) expect(await uidOf(broker.child.pid!)).toBe(NOBODY);
      else expect(await uidOf(broker.child.pid!)).not.toBe(0);
      const health = await fetch(`${url}/health`);
      expect(health.status).toBe(200);
      expect((await fetch(`${url}/openapi.yaml`)).status).toBe(200);
    } finally {
      expect(await stop(broker), broker.output()).toBe(0);
    }
  }, 150_000);

  it('writes its embedded Postgres into DATA_DIR without DATABASE_URL, as a non-root user', async () => {
    const data = await ownedFolder('data');
    const broker = startMain({ DATA_DIR: data, SANDBOX: 'true' });
    try {
      const url = await broker.url;
      expect((await fetch(`${url}/health`)).status).toBe(200);
      expect(broker.output()).toContain('"database":"embedded"');
    } finally {
      expect(await stop(broker), broker.output()).toBe(0);
    }
  }, 150_000);

  it('refuses clearly a DATA_DIR it may not write', async () => {
    const locked = path.join(work, 'locked');
    await mkdir(locked);
    await chmod(locked, 0o555);
    const broker = startMain({ DATA_DIR: path.join(locked, 'data'), SANDBOX: 'true' });
    const code = await exitWithin(broker, 20_000);
    expect(code).not.toBe('running');
    expect(code).not.toBe(0);
    expect(broker.output()).toMatch(/DATA_DIR \S+ cannot be written by this user/);
  }, 60_000);

  it('refuses to start in production without COMPOSIO_API_KEY unless SANDBOX=true', async () => {
    const broker = startMain({ DATABASE_URL: database.url });
    expect(await exitWithin(broker, 20_000)).toBe(78);
    expect(broker.output()).toMatch(/COMPOSIO_API_KEY: required in production/);
    expect(broker.output()).toMatch(/SANDBOX=true/);
  });

  it('refuses to start in production without DATA_ENCRYPTION_KEYS, naming it', async () => {
    const broker = startMain({ DATABASE_URL: database.url, SANDBOX: 'true', DATA_ENCRYPTION_KEYS: '' });
    expect(await exitWithin(broker, 20_000)).toBe(78);
    expect(broker.output()).toMatch(/DATA_ENCRYPTION_KEYS: required in production/);
  });
});
