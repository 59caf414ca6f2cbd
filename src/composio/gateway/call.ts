import type { Logger } from 'pino';
import { type Budget, BudgetExhausted, CallBudget } from '../call-budget.js';
import { currentCaller } from '../caller.js';
import { isConnectionFailure, toFailure } from '../errors.js';
import type { ComposioFailure } from '../failure.js';
import { FairQueue } from '../fair-queue.js';

/**
 * The most items Composio gives on a page of its lists: "max allowed is 50" on trigger types,
 * active triggers, Session toolkits, auth configs and webhook subscriptions; connected accounts
 * state no maximum, and 50 is the safe reading (composio-api.md §10 row 1). Whether a larger
 * `limit` is clamped or refused is undocumented, so none is ever sent.
 */
export const MAX_PAGE = 50;

/** A page size Composio takes: what the caller asked for, never above `max`. */
export function pageLimit(limit: number, max: number = MAX_PAGE): number {
  return Math.max(1, Math.min(Math.floor(limit), max));
}

export interface CallCoreOptions {
  /** The budget for HTTP requests to Composio, shared by everything the gateway does. */
  readonly callsPerMinute: number;
  /** Bound on each call's answer, and on how long a call may queue for budget. */
  readonly timeoutMs: number;
  /**
   * The budget the calls take tokens from: the one shared by every process on the project
   * (`sharedCallBudget`), or by default this process's own.
   */
  readonly budget?: Budget | undefined;
  readonly logger: Logger;
  /** Called once per call with outcome `ok` or the failure's code (for metrics). */
  readonly onCall?: ((operation: string, outcome: string, seconds: number) => void) | undefined;
}

/** What a call is about and how it may be handled. */
interface CallAbout {
  /** In words, for the failure's sentence: `connected account ca_1`, `Session trs_1`. */
  readonly subject?: string;
  readonly toolkit?: string;
  /** Safe to send again when the connection failed before any answer. */
  readonly idempotent?: boolean;
  /** The caller's own signal: its abort cancels the call and is passed on as it is. */
  readonly signal?: AbortSignal;
  /**
   * This call's own bound on its answer, from when it has its budget, in place of `timeoutMs`
   * and the request's deadline (an MCP tool call may take minutes). The wait for budget is
   * still bounded by the request's deadline.
   */
  readonly timeoutMs?: number;
}

export interface CallCore {
  /**
   * Every Composio call goes through here: budget (`cost` = HTTP requests it makes), one
   * deadline for the answer, a 429 pausing the budget, failures mapped once, `onCall` for
   * metrics. `outcomeOf` names a successful answer for metrics when `ok` says too little.
   */
  call<T>(
    operation: string,
    cost: number,
    about: CallAbout,
    fn: (signal: AbortSignal) => Promise<T>,
    outcomeOf?: (result: T) => string,
  ): Promise<T>;
  /** A call refused before anything was sent: reported and logged like any other failure. */
  refuse(operation: string, failure: ComposioFailure): ComposioFailure;
}

export function createCallCore(options: CallCoreOptions): CallCore {
  const log = options.logger;
  const budget = options.budget ?? new CallBudget({ callsPerMinute: options.callsPerMinute, maxWaitMs: options.timeoutMs });
  // Which caller's call takes the next token: each installation queues behind its own calls.
  const queue = new FairQueue(budget);

  function report(operation: string, outcome: string, started: number): void {
    options.onCall?.(operation, outcome, (performance.now() - started) / 1000);
  }

  function fail(operation: string, failure: ComposioFailure, cause: unknown, started: number): ComposioFailure {
    const detail = { operation, code: failure.code, cause: describeCause(cause) };
    if (failure.kind === 'unavailable' || failure.kind === 'rate_limited') log.warn(detail, 'Composio call failed');
    else log.debug(detail, 'Composio call refused');
    report(operation, failure.code, started);
    return failure;
  }

  return {
    /**
     * One deadline per request (`runAsCaller`), or per call outside a request: the wait for
     * budget and every call's answer must fit in it. A call's answer is bounded by the time left
     * and by `timeoutMs`, and ends when `fn` settles: for the MCP fetch that is when the answer's
     * status and headers are in, so a streamed body may run on for as long as the caller's
     * signal allows.
     *
     * The one retry left: a call that is safe to repeat (`idempotent`) and failed to connect
     * at all — typically a pooled keep-alive connection the other side had just closed — is
     * sent once more at once. Statuses (429, 409, 5xx) and timeouts are never retried here.
     */
    async call(operation, cost, about, fn, outcomeOf) {
      const started = performance.now();
      const caller = currentCaller();
      const flow = caller?.flow ?? 'broker';
      const deadlineAt = Math.min(caller?.deadlineAt ?? Number.POSITIVE_INFINITY, started + options.timeoutMs);
      const deadline = new AbortController();
      let timer: NodeJS.Timeout | undefined;
      try {
        await queue.take(flow, cost, deadlineAt, about.signal);
        const answerBy = about.timeoutMs === undefined ? deadlineAt : performance.now() + about.timeoutMs;
        timer = setTimeout(() => deadline.abort(), Math.max(0, answerBy - performance.now()));
        const signal = about.signal ? AbortSignal.any([about.signal, deadline.signal]) : deadline.signal;
        let result: Awaited<ReturnType<typeof fn>>;
        try {
          result = await fn(signal);
        } catch (error) {
          if (!about.idempotent || signal.aborted || !isConnectionFailure(error)) throw error;
          await queue.take(flow, cost, deadlineAt, about.signal);
          result = await fn(signal);
        }
        report(operation, outcomeOf?.(result) ?? 'ok', started);
        return result;
      } catch (error) {
        // The caller gave up: not Composio's failure, and nobody is left to tell.
        if (about.signal?.aborted) throw error;
        const failure = toFailure(error, {
          subject: about.subject,
          toolkit: about.toolkit,
          timeoutMs: about.timeoutMs ?? options.timeoutMs,
          timedOut: deadline.signal.aborted,
        });
        // Composio asked everybody to wait; our own budget refusing asks nothing new.
        if (failure.kind === 'rate_limited' && !(error instanceof BudgetExhausted)) {
          await Promise.resolve(budget.pause(failure.retryAfterMs ?? 0)).catch((cause: unknown) =>
            log.warn({ operation, cause: describeCause(cause) }, 'could not record the Composio pause'),
          );
        }
        throw fail(operation, failure, error, started);
      } finally {
        clearTimeout(timer);
      }
    },

    refuse(operation, failure) {
      return fail(operation, failure, failure, performance.now());
    },
  };
}

/** "Connection error. <- fetch failed <- other side closed": the chain a log reader needs. */
function describeCause(error: unknown): string {
  const parts: string[] = [];
  let current: unknown = error;
  for (let depth = 0; depth < 5 && current !== undefined && current !== null; depth++) {
    if (current instanceof Error) {
      const code = (current as { code?: unknown }).code;
      parts.push(typeof code === 'string' ? `${current.message} (${code})` : current.message);
      current = current.cause;
    } else {
      parts.push(String(current));
      break;
    }
  }
  return parts.join(' <- ');
}
