import { badRequest } from './errors.js';
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

  /** The fault that applies to this request, consuming one use of it. */
  take(method: string, path: string, now = Date.now()): FaultSpec | undefined {
    this.active = this.active.filter((f) => f.remaining > 0 && f.until > now);
    const fault = this.active.find(
      (f) => (!f.spec.path || path.startsWith(f.spec.path)) && (!f.spec.method || f.spec.method.toUpperCase() === method),
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
