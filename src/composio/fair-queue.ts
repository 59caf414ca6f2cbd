import { type Budget, BudgetExhausted } from './call-budget.js';

/**
 * Decides which caller's Composio call takes the budget's next token. Calls are queued per
 * flow (one flow per installation); each flow's calls go in their own order, and the next token
 * goes to the waiting flow that has used the least budget lately (calls served, decaying with a
 * five-second time constant). A flow that floods therefore waits behind its own backlog, while
 * one that calls now and then — using less than its share — is served at the next token,
 * whatever the backlog of the others; flooders share what is left evenly. Tokens are taken one
 * call at a time from the budget (shared by every process when it is the Postgres one), so the
 * order here is the order of service.
 *
 * The backlog takes its tokens leaving a small reserve in the bucket (`keepReserve`). A call of a
 * flow with nothing queued that has used less lately than every waiting flow first tries to take
 * a token at once, from that reserve; only if there is none does it queue. So under saturation a
 * light caller does not even wait for the next token.
 */
interface Entry {
  readonly cost: number;
  readonly deadlineAt: number;
  readonly seq: number;
  settled: boolean;
  resolve(): void;
  reject(error: unknown): void;
}

/** How fast past use is forgotten: after 5 s a call weighs 1/e of what it did. */
const USAGE_TIME_CONSTANT_MS = 5_000;
/**
 * A flow is light while it has used less than two thirds of what the least-using other waiting
 * flow has: clearly under its share, not one flooder among equals.
 */
const LIGHT_RATIO = 1.5;
/** Flows remembered when idle, so a flooder that pauses for a moment does not jump the queue. */
const MAX_REMEMBERED_FLOWS = 50_000;

interface Usage {
  score: number;
  at: number;
}

export class FairQueue {
  private readonly flows = new Map<string, Entry[]>();
  private readonly usage = new Map<string, Usage>();
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
    const now = this.now();
    if (!this.flows.has(flow) && deadlineAt > now && this.isLight(flow, now)) {
      return this.budget.acquire(cost, 0).then(
        () => this.served(flow, cost),
        (error: unknown) => {
          if (!(error instanceof BudgetExhausted)) throw error;
          return this.enqueue(flow, cost, deadlineAt, signal);
        },
      );
    }
    return this.enqueue(flow, cost, deadlineAt, signal);
  }

  /**
   * Under its share: it has used clearly less lately than every other waiting flow (or none
   * waits). A light flow takes from the reserve the backlog leaves.
   */
  private othersWaiting(flow: string): boolean {
    for (const other of this.flows.keys()) if (other !== flow) return true;
    return false;
  }

  private isLight(flow: string, now: number): boolean {
    const used = this.usedLately(flow, now) * LIGHT_RATIO;
    for (const other of this.flows.keys()) if (other !== flow && this.usedLately(other, now) <= used) return false;
    return true;
  }

  private enqueue(flow: string, cost: number, deadlineAt: number, signal?: AbortSignal): Promise<void> {
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

  /** The head of the waiting flow that used the least lately (then the earliest arrival). */
  private next(): { flow: string; entry: Entry } | undefined {
    const now = this.now();
    let best: { flow: string; entry: Entry; used: number } | undefined;
    for (const [flow, entries] of this.flows) {
      const entry = entries[0];
      if (!entry) continue;
      const used = this.usedLately(flow, now);
      if (!best || used < best.used || (used === best.used && entry.seq < best.entry.seq)) best = { flow, entry, used };
    }
    return best && { flow: best.flow, entry: best.entry };
  }

  private usedLately(flow: string, now: number): number {
    const usage = this.usage.get(flow);
    return usage ? usage.score * Math.exp(-(now - usage.at) / USAGE_TIME_CONSTANT_MS) : 0;
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
          // The backlog leaves the reserve; a light flow that found it empty and queued behind
          // heavier ones need not.
          const light = this.othersWaiting(flow) && this.isLight(flow, this.now());
          await this.budget.acquire(entry.cost, remaining, !light);
          this.served(flow, entry.cost);
          entry.resolve();
        } catch (error) {
          entry.reject(error);
        }
      }
    } finally {
      this.pumping = false;
    }
  }

  private served(flow: string, cost: number): void {
    const now = this.now();
    if (this.usage.size >= MAX_REMEMBERED_FLOWS && !this.usage.has(flow)) {
      // Forget the flows whose use has faded; at worst everything (a flood of new flows).
      for (const [key] of this.usage) if (this.usedLately(key, now) < 0.01) this.usage.delete(key);
      if (this.usage.size >= MAX_REMEMBERED_FLOWS) this.usage.clear();
    }
    this.usage.set(flow, { score: this.usedLately(flow, now) + cost, at: now });
  }

  private drop(flow: string, entry: Entry): void {
    const entries = this.flows.get(flow);
    if (!entries) return;
    const at = entries.indexOf(entry);
    if (at >= 0) entries.splice(at, 1);
    if (entries.length === 0) this.flows.delete(flow);
  }
}
