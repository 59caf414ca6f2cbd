import { mkdtemp, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TestProject } from 'vitest/node';
import { buildBroker } from '../../scripts/build.js';
import { isProcessFile } from './process-files.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /**
     * The folder of this run's compiled broker (see below), provided only when the run includes
     * a file of process-files.ts. Its `build-result.json` appears once the build has ended.
     */
    brokerBuild: string;
  }
}

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** Written, whole, once the build has ended: `{ ok: true }`, or `{ ok: false, output }` with esbuild's words. */
export const BUILD_RESULT = 'build-result.json';

/** What the compiled code reads beside `dist/` at run time, linked to the repository's own. */
const BESIDE_DIST = ['migrations', 'package.json', 'node_modules', 'openapi.yaml'];

/**
 * The broker built once for the run by `npm run build`'s own code (scripts/build.ts), so that the
 * brokers and CLIs the process tests start run `node dist/main.js` as production does: loading
 * the source through tsx costs each start about three times the CPU. Into a temporary folder laid
 * out as the image's /app: `dist/`, and links to `migrations/`,
 * `package.json` (the release, and `"type": "module"` for dist's files), `node_modules/` and
 * `openapi.yaml`.
 *
 * Only when the run includes a file of process-files.ts. The build is not waited for here:
 * it goes on while Postgres starts and the other projects run, and broker-process.ts waits for
 * `build-result.json` before a first start.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  if (!(await runsProcessTests(project))) return async () => {};
  const dir = await mkdtemp(path.join(tmpdir(), 'omb-test-build-'));
  await Promise.all(BESIDE_DIST.map((name) => symlink(path.join(ROOT, name), path.join(dir, name))));
  // Should even the result not be written, the first start that waits for it says so.
  const built = build(dir).catch(() => {});
  project.provide('brokerBuild', dir);
  return async () => {
    await built;
    await rm(dir, { recursive: true, force: true });
  };
}

/** Whether the run includes a file of process-files.ts (the command line may name files). */
export async function runsProcessTests(project: TestProject): Promise<boolean> {
  const integration = project.vitest.projects.find((p) => p.name === 'integration');
  if (!integration) return false;
  // The file filters of the command line (`vitest run <file>`): Vitest keeps them in a field of its
  // own before the global setup runs. Without them, every file of the project is in the run.
  const filters = (project.vitest as unknown as { filenamePattern?: unknown }).filenamePattern;
  const { testFiles } = await integration.globTestFiles(Array.isArray(filters) ? (filters as string[]) : []);
  return testFiles.some((file) => isProcessFile(path.relative(ROOT, file).split(path.sep).join('/')));
}

/** A failed build is written down, and the first start that needs it reports it. */
async function build(dir: string): Promise<void> {
  const result = await buildBroker(ROOT, path.join(dir, 'dist')).then(
    (): { ok: boolean; output?: string } => ({ ok: true }),
    (error: unknown) => ({ ok: false, output: error instanceof Error ? error.message : String(error) }),
  );
  // Renamed into place, so that a reader never sees half of it.
  const partial = path.join(dir, `${BUILD_RESULT}.partial`);
  await writeFile(partial, JSON.stringify(result));
  await rename(partial, path.join(dir, BUILD_RESULT));
}
