import type { TriggerType } from '../composio/index.js';
import { badRequest } from '../errors.js';
import { buildGmailQuery, type GmailFilter } from './gmail-query.js';

/**
 * Composio-managed sign-ins cannot be polled more often than every 15 minutes; a shorter
 * interval is refused or throttled by Composio, so the broker asks for at least this.
 */
export const MIN_POLL_INTERVAL_MINUTES = 15;

/**
 * The `trigger_config` sent to Composio: the client's `config`, plus the Gmail search built
 * from `filter`, plus a polling interval no shorter than Composio allows. What is stored and
 * answered stays what the client sent, so a repeated request compares equal without asking
 * Composio anything.
 */
export function composioTriggerConfig(
  type: TriggerType,
  input: { readonly toolkit: string; readonly filter: Record<string, string>; readonly config: Record<string, unknown> },
): Record<string, unknown> {
  const config: Record<string, unknown> = { ...input.config };
  if (input.toolkit === 'gmail') {
    const query = buildGmailQuery(input.filter as GmailFilter);
    if (query !== '') config.query = query;
  }
  if (type.type === 'poll' && (input.toolkit === 'gmail' || hasConfigProperty(type, 'interval'))) {
    const asked = config.interval;
    if (asked !== undefined && (typeof asked !== 'number' || !Number.isFinite(asked))) {
      throw badRequest('body.config.interval: must be a number of minutes');
    }
    config.interval = Math.max(MIN_POLL_INTERVAL_MINUTES, asked ?? MIN_POLL_INTERVAL_MINUTES);
  }
  return config;
}

function hasConfigProperty(type: TriggerType, name: string): boolean {
  const properties = type.configSchema.properties;
  return typeof properties === 'object' && properties !== null && Object.hasOwn(properties, name);
}
