import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The folder of the broker's package.json, beside which `migrations/` and `openapi.yaml` live: the
 * nearest folder above this module that holds a package.json. Found rather than counted, because
 * the module is not always at the same depth: `src/package-root.ts` from the source, and inside
 * `dist/main.js` or `dist/operators/cli.js` when built (`npm run build` bundles each entry point
 * into one file, see scripts/build.ts).
 */
export const PACKAGE_ROOT: string = nearestPackage(path.dirname(fileURLToPath(import.meta.url)));

function nearestPackage(from: string): string {
  for (let dir = from; ; dir = path.dirname(dir)) {
    if (existsSync(path.join(dir, 'package.json'))) return dir;
    if (path.dirname(dir) === dir) throw new Error(`no package.json in ${from} or any folder above it`);
  }
}
