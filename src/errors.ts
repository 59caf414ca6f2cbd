/**
 * The one error type domain code throws. `code` is stable and snake_case; `message` is the
 * sentence a person reads in the app. The HTTP layer maps it to `{error, code}` in one place.
 */
export class AppError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    /** Extra response headers (e.g. `retry-after`). */
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'AppError';
  }
}

export const badRequest = (message: string, code = 'invalid_request') => new AppError(400, code, message);
export const unauthorized = (message = 'missing or invalid installation token') => new AppError(401, 'unauthorized', message);
export const forbidden = (message: string, code = 'forbidden') => new AppError(403, code, message);
export const notFound = (message = 'not found', code = 'not_found') => new AppError(404, code, message);
export const conflict = (message: string, code = 'conflict') => new AppError(409, code, message);
export const tooManyRequests = (message: string, retryAfterSeconds?: number) =>
  new AppError(
    429,
    'rate_limited',
    message,
    retryAfterSeconds === undefined ? {} : { 'retry-after': String(Math.max(1, Math.ceil(retryAfterSeconds))) },
  );
export const unavailable = (message: string, code = 'unavailable') => new AppError(503, code, message);
