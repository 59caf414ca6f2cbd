import { type Budget, BudgetExhausted } from './call-budget.js';

/**
 * Decides which caller's Composio call takes the budget's next token. Calls are queued per
 * flow (one flow per installation); each flow's calls go in their own order, and the next token
 * goes to the waiting flow served least recently. A flow that floods therefore waits behind its
 * own backlog, while one that calls now and then is served at the next token, whatever the
 * backlog of the others. Tokens are taken one call at a time from the budget (shared by every
 * process when it is the Postgres one), so the order here is the order of service.
 */
interface Entry {
  readonly cost: number;
  readonly deadlineAt: number;
  readonly seq: number;
  settled: boolean;
  resolve(): void;
  reject(error: unknown): void;
}

/** Flows remembered when idle, so a flooder that pauses for a moment does not jump the queue. */
const MAX_REMEMBERED_FLOWS = 50_000;

export class FairQueue {
  private readonly flows = new Map<string, Entry[]>();
  private readonly lastServed = new Map<string, number>();
  private tick = 0;
  private seq = 0;
  private pumping = false;

  constructor(
    private readonly budget: Budget,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** How many calls are waiting for their turn. */
  get waiting(): number {
    let n = 0;
    for (const entries of this.flows.values()) n += entries.length;
    return n;
  }

  /**
   * Resolves when `flow`'s call may be sent; rejects with `BudgetExhausted` when its turn
   * cannot come before `deadlineAt`, or with the signal's reason when the caller gives up.
   */
  take(flow: string, cost: number, deadlineAt: number, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise<void>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const onAbort = () => settle(() => reject(signal?.reason));
      const settle = (then: () => void) => {
        if (entry.settled) return;
        entry.settled = true;
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        this.drop(flow, entry);
        then();
      };
      const entry: Entry = {
        cost,
        deadlineAt,
        seq: this.seq++,
        settled: false,
        resolve: () => settle(resolve),
        reject: (error) => settle(() => reject(error)),
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      // Still queued at the deadline: refused then, not when its turn finally comes.
      timer = setTimeout(() => entry.reject(new BudgetExhausted(0)), Math.max(0, deadlineAt - this.now()));
      timer.unref?.();
      let entries = this.flows.get(flow);
      if (!entries) {
        entries = [];
        this.flows.set(flow, entries);
      }
      entries.push(entry);
      void this.pump();
    });
  }

  /** The head of the waiting flow served least recently (never served first; then arrival). */
  private next(): { flow: string; entry: Entry } | undefined {
    let best: { flow: string; entry: Entry; served: number } | undefined;
    for (const [flow, entries] of this.flows) {
      const entry = entries[0];
      if (!entry) continue;
      const served = this.lastServed.get(flow) ?? -1;
      if (!best || served < best.served || (served === best.served && entry.seq < best.entry.seq)) best = { flow, entry, served };
    }
    return best && { flow: best.flow, entry: best.entry };
  }

  private async pump(): Promise<void> {
    if (this.pumping) return;
    this.pumping = true;
    try {
      for (let picked = this.next(); picked; picked = this.next()) {
        const { flow, entry } = picked;
        this.drop(flow, entry);
        const remaining = entry.deadlineAt - this.now();
        try {
          if (remaining <= 0) throw new BudgetExhausted(0);
          await this.budget.acquire(entry.cost, remaining);
          this.served(flow);
          entry.resolve();
        } catch (error) {
          entry.reject(error);
        }
      }
    } finally {
      this.pumping = false;
    }
  }

  private served(flow: string): void {
    if (this.lastServed.size >= MAX_REMEMBERED_FLOWS && !this.lastServed.has(flow)) this.lastServed.clear();
    this.lastServed.delete(flow);
    this.lastServed.set(flow, ++this.tick);
  }

  private drop(flow: string, entry: Entry): void {
    const entries = this.flows.get(flow);
    if (!entries) return;
    const at = entries.indexOf(entry);
    if (at >= 0) entries.splice(at, 1);
    if (entries.length === 0) this.flows.delete(flow);
  }
}
