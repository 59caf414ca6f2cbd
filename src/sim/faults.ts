import { badRequest, errorBody, SimCode } from './errors.js';
import { asObject, type Json } from './input.js';

/**
 * Injected failures for the Composio routes (`/api/…` and the MCP endpoint), so a developer or
 * a test can see how the broker behaves when Composio is slow, limiting or broken.
 */
export interface FaultSpec {
  /** Answer with this status and Composio's error body instead of the real answer. */
  readonly status?: number;
  /** Seconds (or an HTTP date), sent as `retry-after`. */
  readonly retryAfter?: number | string;
  /** Wait this long before answering (or before failing). */
  readonly delayMs?: number;
  /** Drop the connection without answering. */
  readonly reset?: boolean;
  /** For the next N matching requests (default 1)… */
  readonly times?: number;
  /** …or for this long, whichever is given. */
  readonly durationMs?: number;
  /** Only requests whose path starts with this. */
  readonly path?: string;
  readonly method?: string;
  readonly message?: string;
  /**
   * MCP only: a slow tool. The message is handled and its answer sent `delayMs` after it
   * arrived, as JSON (status, headers and body at the end) or as an SSE stream (headers at once,
   * keep-alives, then the answer). Taken by the MCP endpoint for messages that have an answer.
   */
  readonly answerAs?: 'json' | 'sse';
  /**
   * A 429 answers as Composio documents it: a flat `{"message": "Rate limit exceeded. …"}` and
   * the `X-RateLimit*` headers. With `envelope`, the body is the `{error: {…}}` of every other
   * error instead (what the broker must read too).
   */
  readonly envelope?: boolean;
  /** A 429's `X-RateLimit-Window-Size`, in seconds (default 600: Composio's ten minutes). */
  readonly windowSeconds?: number;
}

/** Composio's limit per window on the plans below Enterprise (`X-RateLimit`), and its window. */
const RATE_LIMIT = 20_000;
const RATE_LIMIT_WINDOW_SECONDS = 600;

const FAULT_MESSAGES: Record<number, string> = {
  500: 'Internal server error',
  502: 'Bad gateway',
  503: 'Service temporarily unavailable',
  504: 'Gateway timeout',
};

/**
 * The answer an injected status gets. A 429 carries Composio's rate-limit headers, and
 * `retry-after` only when the fault gives one (so a test can see a 429 without it).
 */
export function faultAnswer(fault: FaultSpec & { status: number }): { headers: Record<string, string>; body: unknown } {
  const headers: Record<string, string> = {};
  if (fault.retryAfter !== undefined) headers['retry-after'] = String(fault.retryAfter);
  if (fault.status !== 429) {
    const code = fault.status >= 500 ? SimCode.internal : SimCode.badRequest;
    return { headers, body: errorBody(fault.status, code, fault.message ?? FAULT_MESSAGES[fault.status] ?? 'Injected failure') };
  }
  const window = fault.windowSeconds ?? RATE_LIMIT_WINDOW_SECONDS;
  headers['x-ratelimit'] = String(RATE_LIMIT);
  headers['x-ratelimit-remaining'] = '0';
  headers['x-ratelimit-window-size'] = `${window}s`;
  const per = window % 60 === 0 ? `${window / 60} minute${window === 60 ? '' : 's'}` : `${window} seconds`;
  const message = fault.message ?? `Rate limit exceeded. Limit: ${RATE_LIMIT} requests per ${per}`;
  return { headers, body: fault.envelope ? errorBody(429, SimCode.rateLimited, message) : { message } };
}

interface ActiveFault {
  readonly spec: FaultSpec;
  remaining: number;
  readonly until: number;
}

export class Faults {
  private active: ActiveFault[] = [];

  add(spec: FaultSpec, now = Date.now()): void {
    if (spec.status !== undefined && (!Number.isInteger(spec.status) || spec.status < 400 || spec.status > 599)) {
      throw badRequest('status must be an HTTP error status (400-599)');
    }
    if (spec.delayMs !== undefined && (!(spec.delayMs >= 0) || spec.delayMs > 600_000)) throw badRequest('delayMs must be 0-600000');
    if (spec.status === undefined && spec.delayMs === undefined && !spec.reset) throw badRequest('give status, delayMs or reset');
    if (spec.windowSeconds !== undefined && !(Number.isInteger(spec.windowSeconds) && spec.windowSeconds >= 1)) {
      throw badRequest('windowSeconds must be a whole number of seconds, at least 1');
    }
    if (spec.answerAs !== undefined) {
      if (spec.answerAs !== 'json' && spec.answerAs !== 'sse') throw badRequest('answerAs must be json or sse');
      if (spec.delayMs === undefined || spec.status !== undefined || spec.reset) throw badRequest('answerAs takes delayMs alone');
    }
    const byTime = spec.durationMs !== undefined;
    this.active.push({
      spec,
      remaining: byTime ? Number.POSITIVE_INFINITY : Math.max(1, spec.times ?? 1),
      until: byTime ? now + Math.max(0, spec.durationMs ?? 0) : Number.POSITIVE_INFINITY,
    });
  }

  clear(): void {
    this.active = [];
  }

  /** The fault that applies to this request, consuming one use of it (slow answers aside). */
  take(method: string, path: string, now = Date.now()): FaultSpec | undefined {
    return this.takeWhere(method, path, now, (spec) => spec.answerAs === undefined);
  }

  /** The slow-answer fault for this MCP message's answer, consuming one use of it. */
  takeSlowAnswer(path: string, now = Date.now()): FaultSpec | undefined {
    return this.takeWhere('POST', path, now, (spec) => spec.answerAs !== undefined);
  }

  private takeWhere(method: string, path: string, now: number, kind: (spec: FaultSpec) => boolean): FaultSpec | undefined {
    this.active = this.active.filter((f) => f.remaining > 0 && f.until > now);
    const fault = this.active.find(
      (f) => kind(f.spec) && (!f.spec.path || path.startsWith(f.spec.path)) && (!f.spec.method || f.spec.method.toUpperCase() === method),
    );
    if (!fault) return undefined;
    fault.remaining -= 1;
    return fault.spec;
  }

  list(now = Date.now()): { spec: FaultSpec; remaining: number | null; expiresAt: string | null }[] {
    return this.active
      .filter((f) => f.remaining > 0 && f.until > now)
      .map((f) => ({
        spec: f.spec,
        remaining: Number.isFinite(f.remaining) ? f.remaining : null,
        expiresAt: Number.isFinite(f.until) ? new Date(f.until).toISOString() : null,
      }));
  }
}

/** Reads a fault from a JSON control request. */
export function parseFaultSpec(raw: unknown): FaultSpec {
  const body: Json = asObject(raw);
  const num = (key: string): number | undefined => {
    const v = body[key];
    if (v === undefined || v === null || v === '') return undefined;
    const n = Number(v);
    if (!Number.isFinite(n)) throw badRequest(`${key} must be a number`);
    return n;
  };
  const str = (key: string): string | undefined => (typeof body[key] === 'string' && body[key] !== '' ? (body[key] as string) : undefined);
  const retryAfter = typeof body.retryAfter === 'string' && !/^\d+(\.\d+)?$/.test(body.retryAfter) ? body.retryAfter : num('retryAfter');
  const spec: FaultSpec = {
    ...(num('status') !== undefined ? { status: num('status') as number } : {}),
    ...(retryAfter !== undefined ? { retryAfter } : {}),
    ...(num('delayMs') !== undefined ? { delayMs: num('delayMs') as number } : {}),
    ...(body.reset === true || body.reset === 'true' || body.reset === 'on' ? { reset: true } : {}),
    ...(num('times') !== undefined ? { times: num('times') as number } : {}),
    ...(num('durationMs') !== undefined ? { durationMs: num('durationMs') as number } : {}),
    ...(str('path') ? { path: str('path') as string } : {}),
    ...(str('method') ? { method: str('method') as string } : {}),
    ...(str('message') ? { message: str('message') as string } : {}),
    ...(str('answerAs') ? { answerAs: str('answerAs') as 'json' | 'sse' } : {}),
    ...(body.envelope === true || body.envelope === 'true' || body.envelope === 'on' ? { envelope: true } : {}),
    ...(num('windowSeconds') !== undefined ? { windowSeconds: num('windowSeconds') as number } : {}),
  };
  return spec;
}

export interface RecordedRequest {
  readonly method: string;
  /** Path without the query string. */
  readonly path: string;
  readonly query: string;
  /** Epoch milliseconds when the request arrived. */
  readonly at: number;
  status: number | null;
  /** The caller closed the connection before the answer was complete (a hang-up, a deadline). */
  abandoned: boolean;
}

/** The last requests that reached the Composio routes (newest last), for tests and the index page. */
export class RequestLog {
  private entries: RecordedRequest[] = [];

  constructor(private readonly capacity = 1000) {}

  record(method: string, url: string, at = Date.now()): RecordedRequest {
    const q = url.indexOf('?');
    const entry: RecordedRequest = {
      method,
      path: q < 0 ? url : url.slice(0, q),
      query: q < 0 ? '' : url.slice(q + 1),
      at,
      status: null,
      abandoned: false,
    };
    this.entries.push(entry);
    if (this.entries.length > this.capacity) this.entries.splice(0, this.entries.length - this.capacity);
    return entry;
  }

  list(): readonly RecordedRequest[] {
    return [...this.entries];
  }

  clear(): void {
    this.entries = [];
  }
}
