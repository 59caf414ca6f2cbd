/** A background job of one broker process. */
export interface RepeatingJob {
  /** No further run starts; resolves when a run in progress has finished. */
  stop(): Promise<void>;
}

/**
 * Runs `run` once `firstDelayMs` after start (soon, so a broker that restarts often still gets to
 * it), then `intervalMs` after each run ends: runs never overlap. `run` handles its own failures
 * (log and retry at the next run); the timer never keeps the process alive.
 */
export function startRepeatingJob(run: () => Promise<void>, options: { intervalMs: number; firstDelayMs: number }): RepeatingJob {
  let stopped = false;
  let running: Promise<void> | undefined;
  let timer: NodeJS.Timeout | undefined;
  const schedule = (delayMs: number) => {
    if (stopped) return;
    timer = setTimeout(() => {
      running = run().finally(() => {
        running = undefined;
        schedule(options.intervalMs);
      });
    }, delayMs);
    timer.unref();
  };
  schedule(Math.min(options.intervalMs, options.firstDelayMs));
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
