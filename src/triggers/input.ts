import { z } from 'zod';
import { ConnectedAccountId, ToolkitSlug } from '../connectors/patterns.js';
import { unstorablePath } from '../http/json-limits.js';
import { triggerNotFound } from './errors.js';
import { GMAIL_FILTER_KEYS, labelTerm, searchableText } from './gmail-query.js';

/** What a client may send to the trigger routes, checked before anything is looked up. */

const MAX_FILTER_KEYS = 20;
const MAX_FILTER_VALUE_LENGTH = 256;
const MAX_CONFIG_BYTES = 8 * 1024;

const TriggerSlug = z
  .string()
  .regex(/^[A-Z][A-Z0-9_]{0,127}$/, 'must be a trigger type in upper snake case, such as GMAIL_NEW_GMAIL_MESSAGE');

const AutomationId = z
  .string()
  .min(1, 'must not be empty')
  .max(128, 'must be at most 128 characters')
  .regex(/^[^\p{C}]+$/u, 'must be printable characters');

/** A dot path into an event's data (`sender.login`, `items.0.name`). */
const DOT_PATH = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/;

// zod silently drops a `__proto__` key from records; refusing it keeps what is stored what was sent.
const RecordKey = (max: number) =>
  z
    .string()
    .max(max)
    .refine((key) => key !== '__proto__');

const Filter = z
  .record(RecordKey(200), z.string().max(MAX_FILTER_VALUE_LENGTH, `must be at most ${MAX_FILTER_VALUE_LENGTH} characters`))
  .refine((filter) => Object.keys(filter).length <= MAX_FILTER_KEYS, `must have at most ${MAX_FILTER_KEYS} keys`);

const Config = z
  .record(RecordKey(128), z.json())
  .refine((config) => Buffer.byteLength(JSON.stringify(config)) <= MAX_CONFIG_BYTES, `must be at most ${MAX_CONFIG_BYTES} bytes of JSON`);

export const CreateTriggerBody = z
  .strictObject({
    automationId: AutomationId,
    toolkit: ToolkitSlug,
    triggerSlug: TriggerSlug,
    connectedAccountId: ConnectedAccountId,
    filter: Filter.default({}),
    config: Config.default({}),
    enabled: z.boolean().default(true),
  })
  .superRefine((body, ctx) => {
    const issue = (path: string[], message: string) => ctx.addIssue({ code: 'custom', path, message });
    const gmail = body.toolkit === 'gmail';
    for (const [key, value] of Object.entries(body.filter)) {
      if (gmail) {
        if (!(GMAIL_FILTER_KEYS as readonly string[]).includes(key)) {
          issue(['filter', key], `is not a Gmail filter; use ${GMAIL_FILTER_KEYS.join(', ')}`);
        } else if ((key === 'label' ? labelTerm(value) : searchableText(value)) === '') {
          // Ignoring it would silently turn the trigger into "all mail".
          issue(['filter', key], 'must contain a letter, digit or symbol to search for');
        }
      } else if (!DOT_PATH.test(key)) {
        issue(['filter', key], 'must be a dot path into the event data, such as sender.login');
      } else if (value.trim() === '') {
        issue(['filter', key], 'must not be empty');
      }
    }
    // Refused here, before Composio is called: Postgres could not store them afterwards.
    for (const field of ['filter', 'config'] as const) {
      const path = unstorablePath(body[field]);
      if (path) issue([field, ...path], 'must not contain NUL characters or unpaired UTF-16 surrogates');
    }
    // The broker writes Gmail's query from the filter, escaped; a raw query would bypass that.
    if (gmail && Object.hasOwn(body.config, 'query')) {
      issue(['config', 'query'], 'is set by the broker; put the search in filter (from, subject, label, words)');
    }
  });

export type CreateTriggerInput = z.output<typeof CreateTriggerBody>;

/** Pause or resume, move to another account of the installation, or both (the move first). */
export const UpdateTriggerBody = z
  .strictObject({
    enabled: z.boolean().optional(),
    connectedAccountId: ConnectedAccountId.optional().describe(
      "Moves the trigger to this ACTIVE account of the installation's, of the same app: same id, automation, filter, config and counters.",
    ),
  })
  .refine((body) => body.enabled !== undefined || body.connectedAccountId !== undefined, {
    message: 'give enabled, connectedAccountId, or both',
  });

/** Trigger ids are UUIDs; anything else names no trigger (404), and never reaches Postgres. */
const TRIGGER_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isTriggerId(value: string): boolean {
  return TRIGGER_ID.test(value);
}

/** The check of every `/:id` trigger route, before its body is validated: anything that cannot be a trigger id is the same 404 as another installation's. */
export async function knownTriggerId(request: { params: unknown }): Promise<void> {
  if (!isTriggerId((request.params as { id: string }).id)) throw triggerNotFound();
}
