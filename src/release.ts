import { readFileSync } from 'node:fs';
import path from 'node:path';
import { PACKAGE_ROOT } from './package-root.js';

/**
 * This broker's release: package.json's version (CHANGELOG.md lists the releases), read at run
 * time from the package beside `src/` or `dist/`, as the image copies it.
 */
export const RELEASE: string = (JSON.parse(readFileSync(path.join(PACKAGE_ROOT, 'package.json'), 'utf8')) as { version: string }).version;

/**
 * Orders two releases by their `major.minor.patch` numbers: negative when `a` is older than `b`,
 * 0 when the same. Anything after the patch number is ignored. A version that is not of that form
 * throws: the ledger's releases are written only from package.json.
 */
export function compareReleases(a: string, b: string): number {
  const pa = numbers(a);
  const pb = numbers(b);
  for (let i = 0; i < 3; i++) if (pa[i] !== pb[i]) return pa[i]! - pb[i]!;
  return 0;
}

function numbers(version: string): [number, number, number] {
  const match = /^(\d+)\.(\d+)\.(\d+)/.exec(version);
  if (!match) throw new Error(`not a release version (major.minor.patch): ${JSON.stringify(version)}`);
  return [Number(match[1]), Number(match[2]), Number(match[3])];
}
