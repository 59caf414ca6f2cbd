import { DrizzleQueryError } from 'drizzle-orm';
import { type DestinationStream, type Logger, pino } from 'pino';
import postgres from 'postgres';

/**
 * Everything that could carry a credential, wherever it appears in a log object. Tokens,
 * project keys, webhook secrets and grants are never written, whatever the level.
 */
const REDACTED_PATHS = [
  'authorization',
  'token',
  'grant',
  'secret',
  'apiKey',
  '*.authorization',
  '*.token',
  '*.grant',
  '*.secret',
  '*.secrets',
  '*.apiKey',
  '*.password',
  '*["x-api-key"]',
  '*["webhook-signature"]',
  '*.headers.authorization',
  '*.headers.cookie',
  '*.headers["x-api-key"]',
  '*.headers["webhook-signature"]',
  'req.headers',
  'res.headers',
];

export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'omb-broker' },
      redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
      serializers: { err: serializeError },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    destination,
  );
}

/**
 * pino's error serializer, minus what a failed statement carries of its input. drizzle's
 * `DrizzleQueryError` writes the statement and every value bound to it into its message and its
 * fields; a Postgres error can quote a value in its detail (`Key (jti)=(…) already exists`), its
 * context (`unnamed portal parameter $1 = '…'`) or, for bad input, its message. Those values are
 * grants' ids, subjects, installation ids: the log gets the statement's name and the error's
 * code and reason instead. Every `err` logged goes through it, whoever logs it.
 */
function serializeError(error: unknown): unknown {
  return pino.stdSerializers.err(withoutBoundValues(error, 0) as Error);
}

/** Causes followed; one nested deeper is left out rather than looked through. */
const MAX_CAUSES = 5;

/** A Postgres error's fields that name what failed and never quote a value. */
const POSTGRES_FIELDS = ['code', 'severity', 'schema_name', 'table_name', 'column_name', 'constraint_name', 'routine'] as const;

/** The error as it may be logged: each database error in its chain replaced by a copy without the values. */
function withoutBoundValues(error: unknown, depth: number): unknown {
  if (!(error instanceof Error)) return error;
  if (depth > MAX_CAUSES) return undefined;
  const cause = withoutBoundValues(error.cause, depth + 1);
  if (error instanceof DrizzleQueryError) {
    const statement = statementName(error.query);
    // drizzle's message is the statement and its values; the reason is its cause's.
    const code = (error.cause as { code?: unknown } | undefined)?.code;
    return copyOf(error, `query failed: ${statement}`, { statement, ...(code === undefined ? {} : { code }) }, cause);
  }
  if (error instanceof postgres.PostgresError) {
    const fields: Record<string, unknown> = {};
    for (const field of POSTGRES_FIELDS) if (error[field] !== undefined) fields[field] = error[field];
    const query = (error as { query?: unknown }).query;
    if (typeof query === 'string') fields.statement = statementName(query);
    // A data exception (class 22) is about a value, and its message may quote it: up to the quote.
    const message = error.code.startsWith('22') ? error.message.replace(/".*$/s, '…') : error.message;
    return copyOf(error, message, fields, cause);
  }
  // postgres.js gives every error of a query (a lost connection too) its statement and values,
  // unlisted unless its debug option is on; a wrapper of a database error needs its cause cleaned.
  const { query, parameters, ...fields } = error as unknown as Record<string, unknown>;
  if (query === undefined && parameters === undefined && cause === error.cause) return error;
  return copyOf(error, error.message, fields, cause);
}

function copyOf(error: Error, message: string, fields: Record<string, unknown>, cause: unknown): Error {
  const copy = Object.assign(Object.create(Object.getPrototypeOf(error)) as Error, fields);
  const hidden = (value: unknown) => ({ value, enumerable: false, writable: true, configurable: true });
  Object.defineProperty(copy, 'message', hidden(message));
  Object.defineProperty(copy, 'stack', hidden(`${error.name}: ${message}\n${framesOf(error).join('\n')}`.trimEnd()));
  if (cause !== undefined) Object.defineProperty(copy, 'cause', hidden(cause));
  return copy;
}

/** The stack's frames, without the message it starts with (which may hold the values). */
function framesOf(error: Error): string[] {
  const stack = error.stack ?? '';
  const at = error.message === '' ? -1 : stack.indexOf(error.message);
  const rest = at === -1 ? stack : stack.slice(at + error.message.length);
  return rest.split('\n').filter((line) => /^\s+at /.test(line));
}

/**
 * A statement's name, from its text: `insert into grants`, `select omb_read_queue`, `select from
 * installations`. The text holds placeholders, not values, but the name is all a log line needs.
 */
function statementName(text: string): string {
  const words = text.replace(/\s+/g, ' ').trim();
  const write = /^(insert into|update|delete from) "?([\w.]+)"?/i.exec(words);
  if (write) return `${write[1]!.toLowerCase()} ${write[2]}`;
  const call = /^select (?:\* from )?"?(omb_\w+)"? ?\(/i.exec(words);
  if (call) return `select ${call[1]}`;
  const verb = /^\w+/.exec(words)?.[0]?.toLowerCase() ?? 'statement';
  const from = /\bfrom "?([\w.]+)"?/i.exec(words);
  return from ? `${verb} from ${from[1]}` : verb;
}
