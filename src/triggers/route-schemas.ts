import { z } from 'zod';
import { ToolkitSlug } from '../connectors/patterns.js';
import { empty, installationToken, json, refusal, refusals, timestamp, uuid } from '../http/responses.js';
import { CreateTriggerBody, UpdateTriggerBody } from './input.js';

/**
 * What the trigger routes (src/triggers/routes.ts) take and answer: the schemas that validate and
 * serialise them, and their part of the reference (openapi.yaml).
 */

/** Any text reaches the route, which answers `404` for what cannot be a trigger id. */
const IdParams = z.object({ id: z.string().meta({ format: 'uuid' }) });

const NewTrigger = CreateTriggerBody.meta({
  id: 'NewTrigger',
  description:
    "`automationId`: the client's automation; one trigger per automation and installation. `connectedAccountId`: one of this installation's connected accounts for `toolkit`. `enabled: false` creates the trigger paused.\n\n" +
    '`filter` — Gmail: keys `from`, `subject`, `label`, `words`, turned into the trigger\'s Gmail search (`from:"…"`, `subject:"…"`, `label:name-with-hyphens`, each word quoted). Quotes, backslashes and control characters become spaces; operators inside a value are plain text. A value with no letter, digit or symbol left is refused. Other apps: each key is a dot path into the event\'s data (`sender.login`) whose value must contain the text, ignoring case; all keys must match. Values must not be empty.\n\n' +
    "`config` — the trigger type's configuration (at most 8 KB of JSON), checked against the type's `configSchema` (types, required fields, `enum`, bounds, lists, and no other settings where the schema allows none), then passed to Composio. Polled triggers get `interval` of at least 15 (minutes), the minimum for Composio-managed sign-ins (shorter is raised to it), and at most 1440 (a day). For Gmail, `query` is written by the broker from `filter` and may not be set.",
});

const Trigger = z
  .object({
    id: uuid(),
    automationId: z.string(),
    toolkit: z.string(),
    triggerSlug: z.string(),
    connectedAccountId: z.string(),
    filter: z.record(z.string(), z.string()),
    config: z.record(z.string(), z.unknown()).describe('The configuration as the client sent it.'),
    enabled: z.boolean(),
    status: z
      .enum(['active', 'paused', 'needs_reconnect', 'disabled_by_composio'])
      .describe(
        '`needs_reconnect` once its account expired (whatever `enabled` says; also when Composio stopped it with `connection_expired`); `disabled_by_composio` when Composio stopped it by itself for another reason (`statusReason` says which; resuming it with `PATCH {enabled: true}` asks Composio to run it again); else `paused` or `active`. The broker also finds such stops by reconciling with Composio, so a trigger Composio lost or stopped does not stay `active` here.',
      ),
    statusReason: z
      .string()
      .optional()
      .meta({ examples: ['subscription_auth_failure'] })
      .describe(
        "With `disabled_by_composio` only: Composio's reason, as it gave it (`subscription_auth_failure`, `subscription_refresh_failure`, `polling_failure_in_composio_infra`, or another Composio may add).",
      ),
    today: z
      .object({
        kept: z.number().int(),
        skipped: z.number().int(),
        skippedReason: z
          .string()
          .nullable()
          .meta({ examples: ['daily_limit'] }),
      })
      .describe('Events of the current UTC day.'),
    createdAt: timestamp(),
  })
  .meta({ id: 'Trigger' });

const TypesQuery = z.strictObject({ toolkit: ToolkitSlug.describe('The app, e.g. `gmail`.') });
const TriggerTypeBody = z
  .object({
    slug: z.string(),
    name: z.string(),
    description: z.string(),
    polled: z.boolean().describe('Composio checks the app on an interval, rather than the app pushing events.'),
    minimumIntervalMinutes: z
      .number()
      .int()
      .nullable()
      .describe(
        'Polled types: the shortest `config.interval` the broker asks Composio for (15); shorter values are raised to it, longer than 1440 (a day) refused.',
      ),
    configSchema: z.record(z.string(), z.unknown()).describe('JSON Schema of `config`, as Composio describes it.'),
    samplePayload: z
      .record(z.string(), z.unknown())
      .describe("Data shaped like this type's events, made from Composio's payload schema (also what `trigger.test` events carry)."),
  })
  .meta({ id: 'TriggerType' });

const triggerNotFoundRefusal = refusal(
  "No trigger of this installation has this id (`trigger_not_found`), also for another installation's trigger.",
);
/** What every route that changes a trigger on Composio may also answer. */
const composioRefusals = {
  429: refusals.installationRateLimited,
  502: refusals.composioFailed,
  503: refusals.composioFailed,
};

/** `POST /v1/triggers` */
export const create = {
  tags: ['triggers'],
  summary: "Create an automation's trigger",
  description:
    "The account must be one of this installation's (checked with Composio), else `404`. The trigger is created on Composio, then stored. The same body again for the same `automationId` answers the stored trigger (`200`) without calling Composio; a different body is `409 automation_conflict`. Composio keeps one trigger per account and configuration, so a second automation with exactly the same trigger is `409 trigger_duplicate`: for Gmail the filter is part of that configuration (it becomes the search); for any other app it is the broker's, and another filter with the same config is the same trigger.",
  security: installationToken,
  body: NewTrigger,
  response: {
    200: json('This automation already has exactly this trigger.', Trigger),
    201: json('Created on Composio and stored.', Trigger),
    400: refusal(
      "A bad field (named in `error`), a `config` its trigger type's schema does not allow among them, or a trigger type or account of another app (`toolkit_mismatch`).",
    ),
    422: refusal('A configuration Composio refused (`composio_rejected`), with Composio’s sentence saying why.'),
    401: refusals.unauthorized,
    403: refusals.installationDisabled,
    404: refusal(
      "Not one of this installation's accounts (`connected_account_not_found`), or no such trigger type (`trigger_type_not_found`).",
    ),
    409: refusal(
      '`automation_conflict`, `trigger_duplicate`, the account already has 10 triggers (`too_many_triggers`, also when creates race for the last place), or the account is signed out (`reconnect_required`).',
    ),
    413: refusals.tooLarge,
    415: refusals.notJson,
    ...composioRefusals,
  },
};

/** `GET /v1/triggers/types` */
export const types = {
  tags: ['triggers'],
  summary: "An app's trigger types",
  description:
    'What the automation editor offers: each trigger type of `toolkit` with its name, description, whether it is polled (and the 15-minute floor), its config schema and a sample payload. From Composio, cached for ten minutes per app and served stale (see the `age` header) while Composio is down. An app Composio does not know has no types (an empty list).',
  security: installationToken,
  querystring: TypesQuery,
  response: {
    200: json('The trigger types.', z.object({ toolkit: z.string(), types: z.array(TriggerTypeBody) })),
    400: refusals.badRequest,
    401: refusals.unauthorized,
    403: refusals.installationDisabled,
    ...composioRefusals,
  },
};

/** `GET /v1/triggers` */
export const list = {
  tags: ['triggers'],
  summary: "The installation's triggers",
  security: installationToken,
  response: {
    200: json('In the order they were created.', z.object({ triggers: z.array(Trigger) })),
    401: refusals.unauthorized,
    403: refusals.installationDisabled,
  },
};

/** `GET /v1/triggers/:id` */
export const one = {
  tags: ['triggers'],
  summary: 'One trigger',
  security: installationToken,
  params: IdParams,
  response: {
    200: json('The trigger.', Trigger),
    401: refusals.unauthorized,
    403: refusals.installationDisabled,
    404: triggerNotFoundRefusal,
  },
};

/** `PATCH /v1/triggers/:id` */
export const update = {
  tags: ['triggers'],
  summary: 'Pause, resume or move a trigger',
  description:
    "`enabled` is switched on Composio first, then stored (Composio's `409` for a state the trigger already has there counts as done; resuming a trigger Composio stopped asks Composio to run it again and clears `disabled_by_composio`). `connectedAccountId` moves the trigger to another of the installation's accounts of the same app, which must be `ACTIVE` (checked with Composio, like create): its Composio trigger is made anew there and the old one deleted, and it keeps its id, automation, filter, config, on/off state and today's counters. A trigger that needs a reconnect comes back by itself once an account under its old label is `ACTIVE`; this is the explicit way.",
  security: installationToken,
  params: IdParams,
  body: UpdateTriggerBody,
  response: {
    200: json('The trigger after the change.', Trigger),
    400: refusal('A bad field (named in `error`), or an account of another app (`toolkit_mismatch`).'),
    401: refusals.unauthorized,
    403: refusals.installationDisabled,
    404: refusal(
      "No trigger of this installation has this id (`trigger_not_found`), or the account is not one of this installation's (`connected_account_not_found`).",
    ),
    409: refusal(
      'The trigger no longer exists on Composio (`trigger_gone`); the new account is signed out (`reconnect_required`); another automation has this trigger on it (`trigger_duplicate`); the new account already has 10 triggers (`too_many_triggers`).',
    ),
    413: refusals.tooLarge,
    415: refusals.notJson,
    ...composioRefusals,
  },
};

/** `DELETE /v1/triggers/:id` */
export const remove = {
  tags: ['triggers'],
  summary: 'Delete a trigger',
  description: 'Deleted on Composio (already gone there is fine: Composio answers `404`, `409` or `410`), then here.',
  security: installationToken,
  params: IdParams,
  response: {
    204: empty('Deleted.'),
    401: refusals.unauthorized,
    403: refusals.installationDisabled,
    404: triggerNotFoundRefusal,
    ...composioRefusals,
  },
};
