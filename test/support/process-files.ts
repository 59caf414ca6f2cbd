/**
 * The test files that spawn processes: brokers, the CLI, Postgres servers of their own, a browser.
 * They are in the integration project beside the in-process files (see vitest.config.ts); this
 * list is how the config (for `npm run test:processes`), the sequencer and the global build tell
 * them apart. Paths and globs from the repository's root.
 */
export const PROCESSES = [
  'test/db/embedded-password.test.ts',
  'test/db/embedded-port.test.ts',
  'test/e2e.test.ts',
  'test/events/concurrency.test.ts',
  'test/events/data-keys-in-use.test.ts',
  'test/faults/failover.test.ts',
  'test/faults/lifecycle.test.ts',
  'test/faults/listener-outage.test.ts',
  'test/faults/hang-up-process.test.ts',
  'test/faults/postgres-restart.test.ts',
  'test/faults/shutdown.test.ts',
  'test/image/dist-entry-points.test.ts',
  'test/operators/backup.test.ts',
  'test/operators/cli-process.test.ts',
  'test/operators/operator-path.test.ts',
  'test/replicas/**/*.test.ts',
  'test/sim/sandbox-restart.test.ts',
  '**/*.browser.test.ts',
];

/** A glob of the list above as a regular expression: `**∕` any folders (or none), `*` any name part. */
function globPattern(glob: string): RegExp {
  let pattern = '';
  for (let i = 0; i < glob.length; i++) {
    if (glob.startsWith('**/', i)) {
      pattern += '(?:.*/)?';
      i += 2;
    } else if (glob[i] === '*') pattern += '[^/]*';
    else pattern += glob[i]!.replace(/[.+?^${}()|[\]\\]/g, '\\$&');
  }
  return new RegExp(`^${pattern}$`);
}

const PATTERNS = PROCESSES.map(globPattern);

/** Whether the file (its path from the repository's root, `/`-separated) is one of PROCESSES. */
export function isProcessFile(file: string): boolean {
  return PATTERNS.some((pattern) => pattern.test(file));
}
