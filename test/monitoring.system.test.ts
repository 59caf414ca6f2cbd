import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

/**
 * docker/prometheus checked with the real tool: Debian's `promtool` (the `prometheus` package,
 * installed by .ci/run) validates the scrape config and the alerting rules and runs the rules'
 * unit tests. In the `system` project (`npm run test:system`) because it needs that package;
 * without it these tests fail, saying what to install. The checks needing no tool are in
 * monitoring.test.ts.
 */

const DOCKER = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../docker');
const run = promisify(execFile);

function promtool(): string {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    const candidate = path.join(dir, 'promtool');
    if (dir && existsSync(candidate)) return candidate;
  }
  if (existsSync('/usr/bin/promtool')) return '/usr/bin/promtool';
  throw new Error("promtool is not installed: `apt-get install prometheus` (Debian's package; .ci/run installs it)");
}

describe('promtool', () => {
  it.each([
    ['check', 'config', 'prometheus/prometheus.yml'],
    ['check', 'rules', 'prometheus/alerts.yml'],
    ['test', 'rules', 'prometheus/alerts.test.yml'],
  ])('%s %s %s succeeds', async (verb, what, file) => {
    const { stdout, stderr } = await run(promtool(), [verb, what, file], { cwd: DOCKER });
    expect(`${stdout}${stderr}`).toMatch(/SUCCESS/);
  });
});
