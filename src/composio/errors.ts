import { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from '@composio/client';
import { ComposioRequestCancelledError, ComposioTriggerTypeNotFoundError } from '@composio/core';
import { BudgetExhausted } from './call-budget.js';
import { ComposioFailure, type ComposioRefusal, wholeSeconds } from './failure.js';

/**
 * The one place where whatever Composio or its SDK throws becomes a `ComposioFailure`.
 * Callers elsewhere only ever see those.
 */

/** When Composio answers 429 without saying how long to back off. */
const DEFAULT_RATE_LIMIT_PAUSE_MS = 5_000;

export interface ErrorContext {
  /** What the call was about, in words: `connected account ca_1`, `Session trs_1`. */
  readonly subject?: string | undefined;
  readonly toolkit?: string | undefined;
  readonly timeoutMs: number;
  /** The call's own deadline passed, whatever the error says. */
  readonly timedOut?: boolean | undefined;
}

/** The sentence shown when an app's sign-in is gone; the agent can fix it itself. */
export function reconnectMessage(toolkit?: string): string {
  const which = toolkit ? `The ${toolkit} account` : 'This account';
  return `${which} is signed out; call COMPOSIO_MANAGE_CONNECTIONS to reconnect it.`;
}

function authConfigRequiredMessage(toolkit: string): string {
  return (
    `The managed service cannot connect ${toolkit}: it has no Composio-managed sign-in. ` +
    'The owner can add their own Composio project key in Settings → API keys.'
  );
}

/** Whether a Composio message or tool result says the account's sign-in is gone. */
export function isSignedOutText(text: string): boolean {
  return /USER_NOT_LOGGED_IN|no (active )?connected account|connected account not found/i.test(text);
}

const NO_MANAGED_AUTH = /does not manage auth for toolkit\s+([A-Za-z0-9_-]+)/i;

/** Connected-account-not-found during execution (the SDK special-cases the same code). */
const ACCOUNT_NOT_FOUND_ON_EXECUTE = 1803;

export function toFailure(error: unknown, context: ErrorContext): ComposioFailure {
  if (error instanceof ComposioFailure) return error;
  const { subject } = context;
  if (error instanceof BudgetExhausted) return rateLimited(error.retryAfterMs, subject);
  if (error instanceof ComposioTriggerTypeNotFoundError) {
    // Core's own message names the slug: "Trigger type GMAIL_X not found".
    return new ComposioFailure('not_found', sentence(error.message) ?? 'Composio has no such trigger type.', { subject });
  }
  if (context.timedOut || isTimeout(error)) {
    const seconds = Math.max(1, Math.round(context.timeoutMs / 1000));
    return unavailable(`Composio did not answer within ${seconds} s; try again shortly.`, subject);
  }
  const api = findApiError(error);
  if (api === undefined) return unavailable('Composio gave an answer the managed service could not use; try again shortly.', subject);
  if (api instanceof APIConnectionError || api.status === undefined) {
    return unavailable('Composio could not be reached; try again shortly.', subject);
  }

  const { message, code } = readBody(api);
  const status = api.status;
  const managed = NO_MANAGED_AUTH.exec(message);
  if (managed) {
    const toolkit = context.toolkit ?? managed[1] ?? 'this app';
    return refused('auth_config_required', authConfigRequiredMessage(toolkit), subject);
  }
  if (code === ACCOUNT_NOT_FOUND_ON_EXECUTE || /USER_NOT_LOGGED_IN/.test(message)) {
    return refused('reconnect_required', reconnectMessage(context.toolkit), subject);
  }
  if (status === 429) return rateLimited(retryAfterMs(api) ?? DEFAULT_RATE_LIMIT_PAUSE_MS, subject);
  if (status === 404 || (status === 400 && /not found/i.test(message))) {
    return new ComposioFailure('not_found', notFoundSentence(message, subject, context.toolkit), { subject });
  }
  if (status === 409) {
    return refused('conflict', sentence(message) ?? `Composio refused: this ${subject ?? 'item'} conflicts with another.`, subject);
  }
  // Our project key, not the person's app: nothing the client can fix.
  if (status === 401) {
    return unavailable("Composio refused the managed service's project key; the operators have to fix it.", subject);
  }
  if (status === 403) {
    return refused(
      'forbidden',
      "Composio does not allow the managed service's project key to do this; the operators have to fix it.",
      subject,
    );
  }
  if (status >= 500 || status === 408) return unavailable(`Composio is having trouble (HTTP ${status}); try again shortly.`, subject);
  if (status === 400 || status === 422) return refused('invalid', sentence(message) ?? 'Composio refused the request.', subject);
  return unavailable(`Composio answered HTTP ${status}; try again shortly.`, subject);
}

/** How long a 429 asked us to wait, from `retry-after-ms` or `retry-after` (seconds or a date). */
function retryAfterMs(error: unknown): number | undefined {
  const api = findApiError(error);
  if (api?.status !== 429) return undefined;
  return api.headers ? retryAfterFromHeaders(api.headers) : DEFAULT_RATE_LIMIT_PAUSE_MS;
}

/**
 * The pause a 429's headers ask for. Composio documents `Retry-After` (seconds until its window
 * resets); `retry-after-ms` and an HTTP date are read too. Without a usable one, a window the
 * headers say is spent (`X-RateLimit-Remaining: 0`) is waited out for its size
 * (`X-RateLimit-Window-Size`, e.g. `600s`), at most `MAX_WINDOW_PAUSE_MS`, so one probe a minute
 * at most meets the limit again; otherwise a short default pause.
 */
export function retryAfterFromHeaders(headers: Headers): number {
  const ms = Number.parseFloat(headers.get('retry-after-ms') ?? '');
  if (Number.isFinite(ms) && ms >= 0) return ms;
  const value = headers.get('retry-after');
  if (value !== null && value.trim() !== '') {
    const seconds = Number(value);
    if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
    const at = Date.parse(value);
    if (!Number.isNaN(at)) return Math.max(0, at - Date.now());
  }
  return windowPauseMs(headers) ?? DEFAULT_RATE_LIMIT_PAUSE_MS;
}

/** At most this long for a spent window with no `Retry-After`: a minute, then one call tries again. */
const MAX_WINDOW_PAUSE_MS = 60_000;

/** `X-RateLimit-Window-Size` (`600s`, `600`, `10m`) when `X-RateLimit-Remaining` says none are left. */
function windowPauseMs(headers: Headers): number | undefined {
  if (headers.get('x-ratelimit-remaining')?.trim() !== '0') return undefined;
  const match = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$/i.exec(headers.get('x-ratelimit-window-size') ?? '');
  if (!match) return undefined;
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[(match[2] ?? 's').toLowerCase() as 'ms' | 's' | 'm' | 'h'];
  return Math.min(Number(match[1]) * unit, MAX_WINDOW_PAUSE_MS);
}

/**
 * The request never got an answer because the connection failed (refused, reset, closed by
 * the other side) — not a timeout, which may mean Composio is still working on it.
 */
export function isConnectionFailure(error: unknown): boolean {
  if (isTimeout(error)) return false;
  const api = findApiError(error);
  return api instanceof APIConnectionError && !(api instanceof APIConnectionTimeoutError);
}

/** The HTTP status Composio answered with, when what was thrown is (or wraps) its answer. */
export function composioStatus(error: unknown): number | undefined {
  const api = findApiError(error);
  return api instanceof APIConnectionError ? undefined : api?.status;
}

/** Composio (or the budget for it) says wait; the sentence names the wait the client is told. */
function rateLimited(waitMs: number, subject?: string): ComposioFailure {
  return new ComposioFailure(
    'rate_limited',
    `Composio is limiting the managed service's calls right now; try again in ${wholeSeconds(waitMs)} s.`,
    { subject, retryAfterMs: waitMs },
  );
}

export function unavailable(message: string, subject?: string): ComposioFailure {
  return new ComposioFailure('unavailable', message, { subject });
}

function refused(reason: ComposioRefusal, message: string, subject: string | undefined): ComposioFailure {
  return new ComposioFailure('refused', message, { reason, subject });
}

function isTimeout(error: unknown): boolean {
  // Our own deadline aborts the request: core reports it as cancelled, the bare client as an
  // abort; the client's per-attempt timer reports a connection timeout.
  return error instanceof ComposioRequestCancelledError || error instanceof APIUserAbortError || error instanceof APIConnectionTimeoutError;
}

/** Core wraps some client errors (link, revoke, trigger create) in its own; look through `cause`. */
function findApiError(error: unknown): APIError | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 5 && current instanceof Error; depth++) {
    if (current instanceof APIError) return current;
    current = current.cause;
  }
  return undefined;
}

/**
 * Composio's error body is `{error: {message, code, status, request_id, suggested_fix?}}`; its
 * 429 is flat, `{message: "Rate limit exceeded. Limit: …"}` (composio-api.md §10 row 8). Both
 * are read.
 */
function readBody(error: APIError): { message: string; code: number | undefined } {
  const body: unknown = error.error;
  const inner = isRecord(body) && isRecord(body.error) ? body.error : isRecord(body) ? body : {};
  const message = typeof inner.message === 'string' ? inner.message : typeof body === 'string' ? body : '';
  const code = typeof inner.code === 'number' ? inner.code : undefined;
  return { message, code };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * What Composio did not find, in words: the app when Composio says it is the toolkit it does
 * not know (a call about a Session may fail on its toolkit), Composio's own sentence when it
 * names the missing thing, otherwise the call's subject.
 */
function notFoundSentence(message: string, subject: string | undefined, toolkit: string | undefined): string {
  if (toolkit && /toolkit/i.test(message)) return `Composio does not know the app ${toolkit}.`;
  const own = /\bnot found\b|does not exist|unknown/i.test(message) ? sentence(message) : undefined;
  return own ?? `Composio does not know this ${subject ?? 'item'}.`;
}

/** Composio's own message as one readable sentence, or undefined when it has none. */
function sentence(message: string): string | undefined {
  const trimmed = message.trim().replace(/\s+/g, ' ').slice(0, 300);
  if (trimmed === '') return undefined;
  return /[.!?]$/.test(trimmed) ? trimmed : `${trimmed}.`;
}
