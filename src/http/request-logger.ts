import type { FastifyBaseLogger, FastifyRequest } from 'fastify';
import type { Bindings, ChildLoggerOptions, Logger } from 'pino';

type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';

/**
 * A request's logger (`request.log`) that becomes a pino child of the broker's logger only when
 * the request writes at an enabled level. Fastify makes one per request; most requests write a
 * single line, when they end, so a held long poll carries no child logger (its bindings, its
 * formatters, its serialized bindings) for the minutes it waits.
 */
class RequestLogger implements FastifyBaseLogger {
  private logger: Logger | undefined;

  constructor(
    private readonly parent: Logger,
    private readonly bindings: Bindings,
  ) {}

  get level(): string {
    return (this.logger ?? this.parent).level;
  }

  set level(level: string) {
    this.real().level = level;
  }

  fatal(...args: unknown[]): void {
    this.write('fatal', args);
  }

  error(...args: unknown[]): void {
    this.write('error', args);
  }

  warn(...args: unknown[]): void {
    this.write('warn', args);
  }

  info(...args: unknown[]): void {
    this.write('info', args);
  }

  debug(...args: unknown[]): void {
    this.write('debug', args);
  }

  trace(...args: unknown[]): void {
    this.write('trace', args);
  }

  silent(): void {}

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.real().child(bindings, options);
  }

  private write(level: Level, args: unknown[]): void {
    const logger = this.logger ?? (this.parent.isLevelEnabled(level) ? this.real() : undefined);
    (logger?.[level] as ((...args: unknown[]) => void) | undefined)?.apply(logger, args);
  }

  private real(): Logger {
    this.logger ??= this.parent.child(this.bindings);
    return this.logger;
  }
}

/** Fastify's `childLoggerFactory`: route options (a route's own level or serializers) still get a pino child at once. */
export function requestLogger(logger: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions): FastifyBaseLogger {
  const parent = logger as Logger;
  return Object.keys(options).length > 0 ? parent.child(bindings, options) : new RequestLogger(parent, bindings);
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by `quietRequest`: the request's line is written at `debug`. */
    quiet: boolean;
  }
}

/**
 * This request's line is written at `debug` rather than `info`: for answers as common and as
 * uneventful as a poll that found nothing (40,000 a second at a million installations), what an
 * operator needs is the request metric, not a line each. (A field of the request, not a
 * WeakSet: entries of weak collections cost the garbage collector on every request.)
 */
export function quietRequest(request: FastifyRequest): void {
  request.quiet = true;
}
