import { relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { isProcessFile } from './process-files.js';

/**
 * The process files that take longest, longest first (vitest's JSON reporter, this 2-core
 * machine). Used only when Vitest has timed none of them itself (a fresh clone, as in CI):
 * otherwise it goes by file size, which put e2e (the smallest and among the slowest) last, and
 * the run waited on it alone. A file missing here only starts later; none is left out.
 */
const LONGEST_PROCESS_FILES = [
  'test/faults/lifecycle.test.ts',
  'test/e2e.test.ts',
  'test/faults/failover.test.ts',
  'test/replicas/shared-limits.test.ts',
  'test/replicas/webhook-rotation.test.ts',
  'test/replicas/rolling-upgrade.test.ts',
  'test/faults/listener-outage.test.ts',
  'test/image/dist-entry-points.test.ts',
  'test/events/concurrency.test.ts',
  'test/faults/shutdown.test.ts',
];

/**
 * The order Vitest hands test files to its workers: its own (slowest first by its timings of
 * earlier runs, or largest first, project by project), except that the files that start processes
 * (process-files.ts) are spread through the others', one in every three, instead of all coming
 * after them. Most of a process file's time is spent waiting on the brokers and Postgres servers
 * it starts (an outage held, a restart, a long poll), and the in-process files beside it use the
 * processor it leaves; run after them, the process files had the machine to themselves and left
 * it half idle.
 */
export class ProcessesAlongside extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const processes = sorted.filter((file) => isProcessFile(this.path(file)));
    const others = sorted.filter((file) => !isProcessFile(this.path(file)));
    if (!processes.some((file) => this.timed(file))) processes.sort((a, b) => this.rank(a) - this.rank(b));
    const order: TestSpecification[] = [];
    while (processes.length > 0 || others.length > 0) {
      const next = processes.shift();
      if (next) order.push(next);
      order.push(...others.splice(0, 2));
    }
    return order;
  }

  private path(file: TestSpecification): string {
    return relative(this.ctx.config.root, file.moduleId).split('\\').join('/');
  }

  /** Whether an earlier run timed this file (the key is Vitest's own, as BaseSequencer reads it). */
  private timed(file: TestSpecification): boolean {
    return this.ctx.cache.getFileTestResults(`${file.project.name}:${relative(this.ctx.config.root, file.moduleId)}`) !== undefined;
  }

  /** Its place in LONGEST_PROCESS_FILES, after them all when not there (a stable sort keeps Vitest's order among those). */
  private rank(file: TestSpecification): number {
    const at = LONGEST_PROCESS_FILES.indexOf(this.path(file));
    return at === -1 ? LONGEST_PROCESS_FILES.length : at;
  }
}
