import type { TriggerType } from '../composio/index.js';
import { badRequest } from '../errors.js';
import { configSchemaIssue } from './config-schema.js';
import { buildGmailQuery, type GmailFilter } from './gmail-query.js';

/**
 * Composio-managed sign-ins cannot be polled more often than every 15 minutes; a shorter
 * interval is refused or throttled by Composio, so the broker asks for at least this.
 */
export const MIN_POLL_INTERVAL_MINUTES = 15;

/**
 * The longest interval the broker asks for: a day. Composio states no ceiling; a trigger polled
 * less often than daily is no longer one, and without a bound any number (`1e308`) went through.
 */
const MAX_POLL_INTERVAL_MINUTES = 24 * 60;

type ConfigInput = { readonly toolkit: string; readonly filter: Record<string, string>; readonly config: Record<string, unknown> };

/**
 * Whether an app's `filter` is part of the trigger Composio holds: Gmail's becomes its search, so
 * Gmail leaves other mail out; any other app's is applied by the broker to what arrives.
 */
export function filterIsComposioConfig(toolkit: string): boolean {
  return toolkit === 'gmail';
}

/**
 * The `trigger_config` sent to Composio: the client's `config`, plus the Gmail search built
 * from `filter`, plus a polling interval no shorter than Composio allows. What is stored and
 * answered stays what the client sent, so a repeated request compares equal without asking
 * Composio anything.
 */
export function composioTriggerConfig(type: TriggerType, input: ConfigInput): Record<string, unknown> {
  const config: Record<string, unknown> = { ...input.config };
  if (filterIsComposioConfig(input.toolkit)) {
    const query = buildGmailQuery(input.filter as GmailFilter);
    if (query !== '') config.query = query;
  }
  if (pollsOnInterval(type, input.toolkit)) {
    const asked = config.interval;
    if (asked !== undefined && (typeof asked !== 'number' || !Number.isFinite(asked))) {
      throw badRequest('body.config.interval: must be a number of minutes');
    }
    // The ceiling is refused on create (`checkedComposioTriggerConfig`); a trigger stored before
    // that rule is moved with its interval brought within it.
    config.interval = Math.min(MAX_POLL_INTERVAL_MINUTES, Math.max(MIN_POLL_INTERVAL_MINUTES, asked ?? MIN_POLL_INTERVAL_MINUTES));
  }
  return config;
}

/**
 * `composioTriggerConfig` for a new trigger, refusing (`400`, naming the field) a config Composio
 * should never see: an interval beyond the broker's ceiling, a number too large to have arrived
 * intact, or anything the type's config schema (from the discovery cache) does not allow. The
 * schema is held against what Composio would get: the broker's Gmail query and raised interval
 * included.
 */
export function checkedComposioTriggerConfig(type: TriggerType, input: ConfigInput): Record<string, unknown> {
  const config = composioTriggerConfig(type, input);
  const asked = input.config.interval;
  if (pollsOnInterval(type, input.toolkit) && typeof asked === 'number' && asked > MAX_POLL_INTERVAL_MINUTES) {
    throw badRequest(`body.config.interval: must be at most ${MAX_POLL_INTERVAL_MINUTES} minutes (a day)`);
  }
  const unsafe = unsafeNumberPath(input.config);
  if (unsafe) {
    throw badRequest(
      `${fieldName(unsafe)}: must be between ${-Number.MAX_SAFE_INTEGER} and ${Number.MAX_SAFE_INTEGER}; larger numbers lose digits in JSON`,
    );
  }
  const issue = configSchemaIssue(type.configSchema, config);
  if (issue) throw badRequest(`${fieldName(issue.path)}: ${issue.message}`);
  return config;
}

/** Polled types get the broker's interval: Gmail's, and any whose config has an `interval`. */
function pollsOnInterval(type: TriggerType, toolkit: string): boolean {
  return type.type === 'poll' && (toolkit === 'gmail' || hasConfigProperty(type, 'interval'));
}

/**
 * Where a number lies beyond ±(2^53 - 1): parsing the body already rounded it, so passing it on
 * would send Composio a number the client did not write. Config nests at most 64 levels (the
 * body's limit), so the walk is bounded.
 */
function unsafeNumberPath(value: unknown, path: string[] = []): string[] | null {
  if (typeof value === 'number') return Math.abs(value) > Number.MAX_SAFE_INTEGER ? path : null;
  if (value === null || typeof value !== 'object') return null;
  for (const [key, item] of Object.entries(value)) {
    const found = unsafeNumberPath(item, [...path, key]);
    if (found) return found;
  }
  return null;
}

const fieldName = (path: readonly string[]) => ['body.config', ...path].join('.');

function hasConfigProperty(type: TriggerType, name: string): boolean {
  const properties = type.configSchema.properties;
  return typeof properties === 'object' && properties !== null && Object.hasOwn(properties, name);
}
