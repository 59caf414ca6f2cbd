import { createReadStream, createWriteStream, existsSync } from 'node:fs';
import { chmod, link, mkdir, readFile, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { createBrotliDecompress } from 'node:zlib';
import { type Browser, chromium } from 'playwright-core';

const DEBIAN_CHROMIUM = '/usr/bin/chromium';
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/**
 * A headless Chromium with nothing reaching out to the network by itself: `CHROMIUM_PATH` when
 * set, Debian's when installed, else the one `npm install` brought (@sparticuz/chromium).
 */
export async function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: await chromiumPath(),
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

async function chromiumPath(): Promise<string> {
  if (process.env.CHROMIUM_PATH) return process.env.CHROMIUM_PATH;
  if (existsSync(DEBIAN_CHROMIUM)) return DEBIAN_CHROMIUM;
  return unpackedChromium();
}

/**
 * @sparticuz/chromium ships the browser Brotli-compressed in its npm tarball. It is unpacked once
 * per version into node_modules/.cache, under a name of this process's own first, then linked to
 * its final name only if no other process got there first: browser tests starting side by side
 * never launch a half-written binary, and never replace one a running browser still starts its
 * helper processes from (Chromium re-executes its own file; a rename over it leaves a deleted one).
 */
async function unpackedChromium(): Promise<string> {
  // The package exports only its entry (build/cjs/index.cjs), two folders below its root.
  const packageRoot = path.resolve(path.dirname(createRequire(import.meta.url).resolve('@sparticuz/chromium')), '../..');
  const { version } = JSON.parse(await readFile(path.join(packageRoot, 'package.json'), 'utf8')) as { version: string };
  const target = path.join(ROOT, 'node_modules', '.cache', 'omb-chromium', version, 'chromium');
  if (existsSync(target)) return target;

  await mkdir(path.dirname(target), { recursive: true });
  const partial = `${target}.${process.pid}.partial`;
  try {
    const compressed = path.join(packageRoot, 'bin', 'chromium.br');
    await pipeline(createReadStream(compressed), createBrotliDecompress(), createWriteStream(partial));
    await chmod(partial, 0o755);
    await link(partial, target).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'EEXIST') throw error;
    });
  } finally {
    await rm(partial, { force: true });
  }
  return target;
}
