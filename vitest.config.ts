import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';
import { PROCESSES } from './test/support/process-files.js';
import { ProcessesAlongside } from './test/support/sequencer.js';

/**
 * The projects, so each part can run alone (`npm run test:<name>`):
 * - unit: pure logic (tests beside the code in src/, and a few under test/), no Postgres;
 * - integration: the rest of test/, against Postgres and the simulator. A new file under test/
 *   lands here unless listed, and Postgres is always there for it. Most run in-process; the files
 *   listed in test/support/process-files.ts spawn brokers, the CLI, Postgres servers or a browser
 *   of their own (`npm run test:processes` runs those alone, `npm run test:integration` the
 *   in-process ones, through OMB_TESTS below). Both kinds are one project because Vitest hands a
 *   worker only files of its own project: as two projects, spread through each other (see
 *   sequencer.ts), nearly every file stopped its worker and started a new one, about forty a run,
 *   each loading Vitest and the app again (some 100 s of processor, a quarter of `npm test`'s). Its files share each worker's
 *   loaded modules (`isolate: false`): loading the app anew for every file was more than half of
 *   the in-process files' time, and a worker of its own per process file was seconds each. A
 *   file that replaces a module (`vi.mock`) needs a module registry of its own, so it is listed
 *   in MOCKING and runs apart ('integration-mocking');
 * - system: `*.system.test.ts`, the tests that need a tool from Debian's packages (nginx,
 *   promtool from prometheus). Not in `npm test`, which needs nothing beyond `npm ci`;
 *   `npm run test:system` runs them after .ci/run installs the packages. Without a package they
 *   fail, naming it; never skipped. A test needing such a tool goes in a file of this name,
 *   apart from the tests beside it that do not.
 */
const SRC_TESTS = 'src/**/*.test.ts';

/** Tests beside the code that still need Postgres. */
const SRC_INTEGRATION = ['src/installations/installations.test.ts'];

const PURE = [
  'test/composio/call-budget.test.ts',
  'test/composio/trust.test.ts',
  'test/events/queue/cursor.test.ts',
  'test/events/queue/hub.test.ts',
  'test/operators/cli.test.ts',
  'test/operators/import-rows.test.ts',
];

/** Integration tests that replace one of the broker's modules with `vi.mock` (see above). */
const MOCKING = ['test/operators/actions.test.ts'];

/** Tests that need a tool from Debian's packages (see above). */
const SYSTEM = '**/*.system.test.ts';

/**
 * The integration project's part to run: `processes` (the files of PROCESSES alone), `in-process`
 * (the others), all of them when unset (as in `npm test`).
 */
const PART = process.env.OMB_TESTS;
const INTEGRATION = PART === 'processes' ? PROCESSES : ['test/**/*.test.ts', ...SRC_INTEGRATION];
const NOT_INTEGRATION = [...PURE, ...MOCKING, SYSTEM, ...(PART === 'in-process' ? PROCESSES : [])];

// Spread into each project rather than inherited, which would give each project the global setup too.
const shared = { testTimeout: 30_000, hookTimeout: 60_000, pool: 'forks', env: { NODE_ENV: 'test' } } as const;

export default defineConfig({
  test: {
    // One Postgres server for the whole run, whichever projects it covers (none for unit alone); and,
    // when the run includes a file of PROCESSES, the broker compiled once for the brokers and CLIs
    // its tests start, and a data folder initialised once for those on a folder of their own. The
    // build goes first: it carries on in the background while Postgres starts.
    globalSetup: ['./test/support/global-build.ts', './test/support/global-postgres.ts', './test/support/global-data-folder.ts'],
    // In-process test files mostly wait on Postgres and timers, so one worker more than the cores
    // keeps them busy (Vitest's default, one fewer, runs files one at a time on two cores).
    maxWorkers: availableParallelism() + 1,
    sequence: { sequencer: ProcessesAlongside },
    projects: [
      { test: { ...shared, name: 'unit', include: [SRC_TESTS, ...PURE], exclude: SRC_INTEGRATION, isolate: false } },
      {
        test: {
          ...shared,
          name: 'integration',
          include: INTEGRATION,
          exclude: NOT_INTEGRATION,
          isolate: false,
        },
      },
      { test: { ...shared, name: 'integration-mocking', include: MOCKING } },
      // Its own run (`npm run test:system`), after the others when run with them; some of these
      // spawn a broker and nginx, so one file per core.
      {
        test: {
          ...shared,
          name: 'system',
          include: [SYSTEM],
          maxWorkers: availableParallelism(),
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
