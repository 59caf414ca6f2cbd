// Preloaded (with --expose-gc) into the processes bench/events.ts compares: on SIGWINCH (a
// signal nothing else here listens to, and ignored by default) it
// collects garbage and reports the process's memory on stderr as one line, so memory per held
// request is read after a full collection instead of whenever the heap last grew.
process.on('SIGWINCH', () => {
  globalThis.gc?.();
  process.stderr.write(`omb-memory ${JSON.stringify(process.memoryUsage())}\n`);
});
