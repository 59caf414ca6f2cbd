import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, symlink, unlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { isDeepStrictEqual, promisify } from 'node:util';
import { build } from 'esbuild';
import { REPO_ROOT } from './releases.js';

const run = promisify(execFile);

/**
 * A released commit checked out beside the working tree (a `git worktree` in the OS temp
 * folder), with dependencies to run it and its broker compiled into its `dist/` (see
 * compileRelease): the tests that start a previous release's broker next to this one's.
 * Nothing is kept between runs: each checkout is made fresh and `remove()`d.
 */
export interface ReleaseCheckout {
  /** The checkout's root: start its broker there (`startBroker(env, { cwd })` runs its `dist/main.js`). */
  readonly dir: string;
  readonly commit: string;
  /** `linked`: every package of the release's lock file is in ours, the same, so ours serve it; `installed`: `npm ci` there. */
  readonly dependencies: 'linked' | 'installed';
  /** Removes the checkout and its record in the repository. */
  remove(): Promise<void>;
}

function git(...args: string[]) {
  return run('git', ['-C', REPO_ROOT, ...args], { maxBuffer: 16 * 1024 * 1024 });
}

/** Fails, saying what to do, when `commit` is not in this clone's history (a shallow clone has only its tip). */
async function requireCommit(commit: string): Promise<void> {
  try {
    await git('cat-file', '-e', `${commit}^{commit}`);
  } catch {
    const shallow = await git('rev-parse', '--is-shallow-repository').then(
      ({ stdout }) => stdout.trim() === 'true',
      () => false,
    );
    throw new Error(
      `commit ${commit} is not in this clone's history${shallow ? ' (a shallow clone)' : ''}: ` +
        'fetch the full history (`git fetch --unshallow`, or `fetch-depth: 0` in CI) so that the release can be checked out',
    );
  }
}

/** A lock file's packages by their folder, leaving out the root entry `""` (which carries the version, different in every release). */
async function lockedPackages(root: string): Promise<Record<string, unknown>> {
  const lock = JSON.parse(await readFile(path.join(root, 'package-lock.json'), 'utf8')) as { packages?: Record<string, unknown> };
  const { '': _root, ...packages } = lock.packages ?? {};
  return packages;
}

/**
 * Whether our node_modules serve the release as its own `npm ci` would: every package its lock
 * file names is in ours, in the same folder, the same. Packages we added since (a new tool) are
 * never loaded by its code, which imports only what its lock names.
 */
async function ourPackagesServe(release: string): Promise<boolean> {
  const [theirs, ours] = await Promise.all([lockedPackages(release), lockedPackages(REPO_ROOT)]);
  return Object.entries(theirs).every(([folder, entry]) => isDeepStrictEqual(entry, ours[folder]));
}

export async function checkOutRelease(commit: string): Promise<ReleaseCheckout> {
  await requireCommit(commit);
  // Records of checkouts whose folder is gone (a run that was killed) would otherwise accumulate.
  await git('worktree', 'prune');
  const dir = await mkdtemp(path.join(tmpdir(), `omb-release-${commit.slice(0, 7)}-`));
  const nodeModules = path.join(dir, 'node_modules');
  let linked = false;
  const remove = async () => {
    // The link first: removing the checkout must never reach into our own node_modules.
    if (linked) await unlink(nodeModules).catch(() => {});
    await git('worktree', 'remove', '--force', dir).catch(() => {});
    await rm(dir, { recursive: true, force: true });
    await git('worktree', 'prune');
  };
  try {
    await git('worktree', 'add', '--detach', dir, commit);
    let dependencies: ReleaseCheckout['dependencies'];
    if (await ourPackagesServe(dir)) {
      await symlink(path.join(REPO_ROOT, 'node_modules'), nodeModules, 'dir');
      linked = true;
      dependencies = 'linked';
    } else {
      await run('npm', ['ci', '--no-audit', '--no-fund', '--prefer-offline'], {
        cwd: dir,
        timeout: 10 * 60_000,
        maxBuffer: 64 * 1024 * 1024,
      });
      dependencies = 'installed';
    }
    await compileRelease(dir, path.join(dir, 'dist'));
    return { dir, commit, dependencies, remove };
  } catch (error) {
    await remove();
    throw error;
  }
}

/**
 * A release's broker compiled as its `npm run build` laid it out: each file of `src/` (tests left
 * out) to its `.js` under `outdir`. Not bundled as this release's is (scripts/build.ts): 0.1.0
 * finds its migrations and package.json by its modules' depth below the package's root.
 */
async function compileRelease(root: string, outdir: string): Promise<void> {
  const src = path.join(root, 'src');
  const entryPoints = (await readdir(src, { recursive: true }))
    .filter((file) => file.endsWith('.ts') && !file.endsWith('.test.ts'))
    .map((file) => path.join(src, file));
  await build({
    entryPoints,
    outdir,
    outbase: src,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    tsconfig: path.join(root, 'tsconfig.build.json'),
    logLevel: 'silent',
  });
}
