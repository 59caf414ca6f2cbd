import { randomUUID } from 'node:crypto';
import { Agent } from 'node:http';
import { startEmbeddedPostgres } from '../src/db/embedded.js';
import { applyMigrations } from '../src/db/migrate.js';
import { createLogger } from '../src/logger.js';
import {
  benchRun,
  type Child,
  fmt,
  heading,
  httpCall,
  type LoadResult,
  line,
  loadFigures,
  percentile,
  runLoad,
  startChild,
} from './lib.js';

/**
 * `npm run bench:limits`: what the shared limiter (counters in Postgres, one upsert per counted
 * request) adds to a counted route, beside the in-memory limiter measured in the same run.
 * The same limited route is served by one process with the in-memory store, one with the shared
 * store, and two with the shared store on one database (the load alternating between them,
 * on the same installations, so the two processes update the same rows). Each figure's
 * "added" is its p50 minus the same server's unlimited route's p50. The target (< 1 ms p50
 * added) is for the one-at-a-time figures; under 16 clients the machine's cores are the limit
 * and the figures say what the upsert costs in throughput.
 */

/** Latency is measured one request at a time (what a request pays); throughput under 16 clients. */
const LEVELS = [1, 16] as const;
const INSTALLATIONS = 100;
const WARMUP_MS = 1000;
const RUN_MS = 4000;

const log = createLogger('warn');
const { dataDir, cleanups, run } = await benchRun('omb-bench-limits-');
await run(main);

async function main(): Promise<void> {
  process.stdout.write('Setting up: embedded Postgres, migrations, limiter servers…\n');
  const embedded = await startEmbeddedPostgres({ dataDir, logger: log, database: 'omb_bench_limits' });
  cleanups.push(() => embedded.stop());
  await applyMigrations(embedded.url, log);

  const memory = await startChild('bench/limits-server.ts', { LIMIT_STORE: 'memory' });
  const sharedA = await startChild('bench/limits-server.ts', { LIMIT_STORE: 'shared', DATABASE_URL: embedded.url });
  const sharedB = await startChild('bench/limits-server.ts', { LIMIT_STORE: 'shared', DATABASE_URL: embedded.url });
  cleanups.push(
    () => memory.stop(),
    () => sharedA.stop(),
    () => sharedB.stop(),
  );
  process.stdout.write(
    `Ready: ${LEVELS.join(' and ')} clients on keep-alive sockets, ${INSTALLATIONS} installations, loopback (Node ${process.version}).\n`,
  );

  const installations = Array.from({ length: INSTALLATIONS }, () => randomUUID());
  const agent = new Agent({ keepAlive: true, maxSockets: 64 });
  const load = async (servers: Child[], route: string, concurrency: number): Promise<LoadResult> => {
    let n = 0;
    return runLoad({
      concurrency,
      warmupMs: WARMUP_MS,
      durationMs: RUN_MS,
      call: async () => {
        const i = n++;
        const server = servers[i % servers.length]!;
        const answer = await httpCall(agent, `${server.url}${route}`, { headers: { 'x-installation': installations[i % INSTALLATIONS]! } });
        return answer.status === 200;
      },
    });
  };

  // Warm every server up (JIT, pools, the counters' rows) before anything is measured.
  for (const server of [memory, sharedA, sharedB]) {
    for (const route of ['/plain', '/counted']) {
      await runLoad({
        concurrency: 4,
        warmupMs: 0,
        durationMs: 1500,
        call: async () =>
          (await httpCall(agent, `${server.url}${route}`, { headers: { 'x-installation': installations[0]! } })).status === 200,
      });
    }
  }
  for (const concurrency of LEVELS) await compare(load, concurrency, [memory, sharedA, sharedB]);
  agent.destroy();
}

async function compare(
  load: (servers: Child[], route: string, concurrency: number) => Promise<LoadResult>,
  concurrency: number,
  [memory, sharedA, sharedB]: [Child, Child, Child],
): Promise<void> {
  heading(`${concurrency} client(s): GET /counted (a counter per installation) beside the same server unlimited (GET /plain)`);
  const p50 = (r: LoadResult) => percentile(r.latenciesMs, 50);
  const rows: Array<[string, LoadResult, LoadResult]> = [];
  for (const [label, servers] of [
    ['in-memory limiter, one process (before)', [memory]],
    ['shared limiter, one process', [sharedA]],
    ['shared limiter, two processes, one database', [sharedA, sharedB]],
  ] as const) {
    const plain = await load([...servers], '/plain', concurrency);
    const counted = await load([...servers], '/counted', concurrency);
    rows.push([label, plain, counted]);
    line(`${label}: unlimited`, ...loadFigures(plain));
    line(`${label}: counted`, ...loadFigures(counted), `added p50 ${fmt.ms(p50(counted) - p50(plain))}`);
  }
  const [memoryRow, oneRow, twoRow] = rows as [
    [string, LoadResult, LoadResult],
    [string, LoadResult, LoadResult],
    [string, LoadResult, LoadResult],
  ];
  const added = (row: [string, LoadResult, LoadResult]) => p50(row[2]) - p50(row[1]);
  const verdict = (ms: number) => (concurrency === 1 ? (ms < 1 ? 'OK (< 1 ms)' : 'OVER 1 ms') : '');

  heading(`Ratios (${concurrency} client(s), same run)`);
  line('counted p50, shared one process / in-memory', `${(p50(oneRow[2]) / p50(memoryRow[2])).toFixed(2)}x`);
  line('counted p50, shared two processes / in-memory', `${(p50(twoRow[2]) / p50(memoryRow[2])).toFixed(2)}x`);
  line('added p50, shared one process', fmt.ms(added(oneRow)), verdict(added(oneRow)));
  line('added p50, shared two processes', fmt.ms(added(twoRow)), verdict(added(twoRow)));
  line('added p50, in-memory (for reference)', fmt.ms(added(memoryRow)));
}
