import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * The order Vitest hands test files to its workers: its own (slowest or largest first, project
 * by project), except that the processes project's files are spread through the others', one in
 * every three, instead of all coming after them. Most of a process file's time is spent waiting
 * on the brokers and Postgres servers it starts (an outage held, a restart, a long poll), and the
 * in-process files beside it use the processor it leaves; run after them, the process files had
 * the machine to themselves and left it half idle.
 */
export class ProcessesAlongside extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const processes = sorted.filter((file) => file.project.name === 'processes');
    const others = sorted.filter((file) => file.project.name !== 'processes');
    const order: TestSpecification[] = [];
    while (processes.length > 0 || others.length > 0) {
      const next = processes.shift();
      if (next) order.push(next);
      order.push(...others.splice(0, 2));
    }
    return order;
  }
}
