import { userInfo } from 'node:os';
import { type ParseArgsConfig, parseArgs } from 'node:util';
import { type Config, ConfigError, loadConfig } from '../../config.js';
import { type DataKeys, keyFile } from '../../data-keys/keys.js';

/** Where a command writes: results on stdout (pipe-friendly), notes and problems on stderr. */
export interface CliIo {
  out(text: string): void;
  err(text: string): void;
}

/** The environment a command reads its configuration from (`process.env` when run by `npm run cli`). */
export type CliEnv = Readonly<Record<string, string | undefined>>;

export interface Command {
  /** As typed: `keys generate`, `admin-token`. */
  readonly name: string;
  readonly summary: string;
  /** The command's own `--help`. */
  readonly usage: string;
  /** Resolves with the exit code. */
  run(args: string[], io: CliIo, env: CliEnv): Promise<number>;
}

/** A mistake in how the command was called: exit code 2 and a pointer to `--help`. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** The command could not do its job: exit code 1 and this one line. */
export class CommandFailed extends Error {
  override name = 'CommandFailed';
}

type Options = NonNullable<ParseArgsConfig['options']>;

/** `node:util` parseArgs, strict, with its errors as one-line usage errors. */
export function parseOptions<O extends Options>(args: string[], options: O) {
  try {
    return parseArgs({ args, options, strict: true, allowPositionals: false });
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message.split('\n')[0]! : String(error));
  }
}

export function requireOption(value: string | undefined, flag: string): string {
  if (value === undefined || value.trim() === '') throw new UsageError(`${flag} is required`);
  return value.trim();
}

/**
 * A positive number no larger than `max`, read from a flag: decimal digits, a fraction allowed
 * (`--days 0.5`). `Number()` alone would take `0x10`, `1e3` and an empty value (as 0).
 */
export function positiveNumber(value: string, flag: string, max: number): number {
  const text = value.trim();
  const number = /^[0-9]+(\.[0-9]+)?$/.test(text) ? Number(text) : Number.NaN;
  if (!(number > 0 && number <= max)) throw new UsageError(`${flag} must be a number above 0 and at most ${max}, in decimal digits`);
  return number;
}

/** A whole number from 1 to `max`, read from a flag: decimal digits only (`2.5` is refused, not rounded). */
export function wholeNumberOption(value: string, flag: string, max: number): number {
  const text = value.trim();
  const number = /^[0-9]+$/.test(text) ? Number(text) : Number.NaN;
  if (!(number >= 1 && number <= max)) throw new UsageError(`${flag} must be a whole number from 1 to ${max}`);
  return number;
}

/** The CLI reads the environment only through the broker's own configuration. */
export function cliConfig(env: CliEnv): Config {
  try {
    return loadConfig(env, { for: 'cli' });
  } catch (error) {
    if (error instanceof ConfigError) throw new CommandFailed(`invalid configuration: ${error.problems.join('; ')}`);
    throw error;
  }
}

/** The brokers' data keys as the CLI is given them: `DATA_ENCRYPTION_KEYS`, or the embedded default's key file. */
export function cliDataKeys(config: Config): DataKeys | undefined {
  return config.dataKeys ?? (config.databaseUrl ? undefined : keyFile(config.dataDir).keys);
}

/** Who runs a command that changes something, for the audit trail: `--as`, else the login name. */
export function cliOperator(value: string | undefined, env: CliEnv): string {
  const name = (value ?? env.USER ?? env.LOGNAME ?? loginName()).trim();
  if (name === '') throw new UsageError('--as must not be empty');
  if (name.length > 256) throw new UsageError('--as must be at most 256 characters');
  return name;
}

function loginName(): string {
  try {
    return userInfo().username || 'unknown';
  } catch {
    return 'unknown';
  }
}
