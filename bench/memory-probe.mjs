// Preloaded (with --expose-gc) into the processes bench/events.ts compares: on SIGWINCH (a
// signal nothing else here listens to, and ignored by default) it collects garbage and reports
// the process's memory on stderr as one line, so memory per held request is read after a full
// collection instead of whenever the heap last grew.
//
// The collection compacts (as V8's idle memory reducer eventually does), so pages left half
// empty by the garbage of the requests' arrival are given back rather than counted per request.
// Beside process.memoryUsage() it reports the anonymous resident memory (the process's own
// allocations, without the binary's pages mapped in as code first runs) and the young
// generation's size: V8 grows that scratch area with the allocation rate, up to a fixed bound per
// process, so it is not a cost of the requests held.
import { readFileSync } from 'node:fs';
import v8 from 'node:v8';

process.on('SIGWINCH', () => {
  v8.setFlagsFromString('--compact-on-every-full-gc');
  globalThis.gc?.();
  v8.setFlagsFromString('--no-compact-on-every-full-gc');
  // V8 gives the emptied pages back on a thread of its own: read once it has.
  setTimeout(report, 1_000);
});

function report() {
  const anonymousKiB = Number(/RssAnon:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'))?.[1] ?? Number.NaN);
  const youngGeneration = v8
    .getHeapSpaceStatistics()
    .filter((space) => space.space_name === 'new_space' || space.space_name === 'new_large_object_space')
    .reduce((sum, space) => sum + space.space_size, 0);
  process.stderr.write(`omb-memory ${JSON.stringify({ ...process.memoryUsage(), anonymous: anonymousKiB * 1024, youngGeneration })}\n`);
}
