import { z } from 'zod';
import { settingText } from '../config.js';
import { isStorableText } from '../http/json-limits.js';
import { decimal } from '../http/query.js';
import { json, operatorToken, refusal, refusals, timestamp, uuid } from '../http/responses.js';
import { INSTANT_RULE, readInstant } from './instant.js';
import { MAX_PAGE } from './lookups.js';

/**
 * What the admin routes (src/operators/routes.ts) take and answer: the schemas that validate and
 * serialise them, and their part of the reference (openapi.yaml).
 */

/** Text compared with what Postgres stores: NUL or an unpaired surrogate is a 400, not a failed query. */
const searchText = (max: number) =>
  z.string().min(1).max(max).refine(isStorableText, 'must not contain NUL characters or unpaired UTF-16 surrogates');

const InstallationParams = z.object({ id: z.uuid() });
const GrantParams = z.object({
  jti: z.string().trim().min(1).max(256).refine(isStorableText, 'must not contain NUL characters or unpaired UTF-16 surrogates'),
});
const RegistrationModeBody = z.strictObject({ mode: z.enum(['open', 'closed']) }).meta({ id: 'RegistrationMode' });

const count = () => z.number().int();
const ServiceStats = z
  .object({
    generatedAt: timestamp(),
    registration: z.enum(['open', 'closed']),
    installations: z.object({
      total: count(),
      disabled: count(),
      byPlan: z.object({ standard: count(), paid: count() }).describe('Enabled installations by the plan they are on now.'),
      activeLastDay: count().describe('Seen in the last 24 hours.'),
    }),
    events: z.object({
      day: z.string().meta({ format: 'date', description: 'The current UTC day.' }),
      keptToday: count(),
      skippedToday: count(),
    }),
    queue: z.object({
      depth: count().describe('Events not yet acknowledged, all installations together.'),
      oldestUnacknowledgedAt: z.string().nullable().meta({ format: 'date-time' }),
      oldestUnacknowledgedAgeSeconds: count().nullable(),
    }),
  })
  .meta({ id: 'ServiceStats' });
const InstallationSwitch = z
  .object({ installationId: uuid(), disabledAt: z.string().nullable().meta({ format: 'date-time' }) })
  .meta({ id: 'InstallationSwitch' });
const Revoked = z.object({ jti: z.string(), revokedAt: timestamp() });

const flag = () =>
  z
    .enum(['true', 'false'])
    .transform((v) => v === 'true')
    .optional();
const instant = () =>
  z
    .string()
    .transform((v, ctx) => {
      const at = readInstant(v);
      if (at === undefined) ctx.addIssue({ code: 'custom', message: INSTANT_RULE, input: v });
      return at ?? z.NEVER;
    })
    .meta({ format: 'date-time' })
    .describe('An ISO 8601 date (`2026-12-01`, midnight UTC) or date and time with its offset (`2026-12-01T09:30:00Z`).')
    .optional();
const pageQuery = {
  limit: decimal(1, MAX_PAGE).default(50).describe(`How many at most (1–${MAX_PAGE}, decimal; default 50).`),
  cursor: z.string().min(1).max(1024).optional().describe("The previous page's `nextCursor`."),
};
const InstallationsQuery = z.strictObject({
  disabled: flag(),
  plan: z.enum(['standard', 'paid']).optional(),
  lastSeenBefore: instant(),
  lastSeenAfter: instant(),
  grantSubject: searchText(256).optional().describe('Installations holding a grant issued to this `sub`.'),
  ...pageQuery,
});
const GrantsQuery = z.strictObject({
  subject: searchText(256).optional(),
  installationId: z.uuid().optional(),
  revoked: flag(),
  expired: flag(),
  ...pageQuery,
});
const AuditQuery = z.strictObject({
  operator: searchText(256).optional(),
  action: searchText(64).optional(),
  target: searchText(256).optional(),
  since: instant(),
  until: instant(),
  limit: pageQuery.limit,
  cursor: z
    .string()
    .regex(/^[1-9][0-9]{0,17}$/, 'not a cursor this list gave out')
    .optional()
    .describe("The previous page's `nextCursor`."),
});

const nullableTime = () => z.string().nullable().meta({ format: 'date-time' });
const GrantSummary = z
  .object({
    jti: z.string(),
    subject: z.string(),
    plan: z.string(),
    issuedAt: timestamp(),
    expiresAt: timestamp(),
    revokedAt: nullableTime(),
  })
  .meta({ id: 'GrantSummary' });
const InstallationSummary = z
  .object({
    id: uuid(),
    createdAt: timestamp(),
    lastSeenAt: timestamp(),
    disabledAt: nullableTime(),
    plan: z.enum(['standard', 'paid']),
    grant: GrantSummary.nullable().describe('The grant it holds (the latest-expiring), usable or not.'),
  })
  .meta({ id: 'InstallationSummary' });
const AdminTrigger = z.object({
  id: uuid(),
  automationId: z.string(),
  toolkit: z.string(),
  triggerSlug: z.string(),
  connectedAccountId: z.string(),
  enabled: z.boolean(),
  status: z.enum(['active', 'paused', 'needs_reconnect', 'disabled_by_composio']),
  statusReason: z.string().optional().describe("With `disabled_by_composio` only: Composio's reason for stopping it."),
  today: z.object({ kept: count(), skipped: count(), skippedReason: z.string().nullable() }),
  createdAt: timestamp(),
});
const InstallationDetail = InstallationSummary.extend({
  events: z.object({
    today: z.object({ day: z.string(), kept: count(), skipped: count(), tests: count().describe('`trigger.test` events queued today.') }),
    last7Days: z.object({ from: z.string().meta({ format: 'date' }), kept: count(), skipped: count() }),
  }),
  queue: z.object({ depth: count(), oldestUnacknowledgedAt: nullableTime(), oldestUnacknowledgedAgeSeconds: count().nullable() }),
  triggers: z.array(AdminTrigger),
  connectedAccounts: count().describe('Distinct connected accounts its triggers use (the accounts the broker knows of).'),
}).meta({ id: 'InstallationDetail' });
const GrantEntry = GrantSummary.extend({
  holderInstallationId: z.string().nullable().meta({ format: 'uuid' }),
  presentedAt: timestamp(),
}).meta({
  id: 'GrantEntry',
});
const AuditEntry = z
  .object({
    id: z.number().int(),
    at: timestamp(),
    operator: z.string().describe("The admin token's `sub`, or the CLI's `--as`."),
    tokenId: z.string().nullable().describe("The admin token's `jti`."),
    source: z.enum(['api', 'cli', 'broker']),
    action: z.string(),
    target: z.string().nullable(),
    outcome: z.string(),
    details: z.record(z.string(), z.unknown()),
  })
  .meta({ id: 'AuditEntry' });
const pageOf = <T extends z.ZodType>(item: T) => z.object({ items: z.array(item), nextCursor: z.string().nullable() });

/** What every admin route may answer besides its own. */
const adminRefusals = {
  401: refusals.operatorUnauthorized,
  403: refusals.adminDisabled,
  429: refusals.rateLimited,
};
const installationNotFound = refusal('No installation has this id (`installation_not_found`).');

/** `GET /v1/admin/stats` */
export const stats = {
  tags: ['operators'],
  summary: 'Figures for the whole service',
  security: operatorToken,
  response: {
    200: json("Installations by plan, activity, today's events and the queue.", ServiceStats),
    ...adminRefusals,
  },
};

/** `GET /v1/admin/registration` */
export const readMode = {
  tags: ['operators'],
  summary: 'Whether new installations may register',
  security: operatorToken,
  response: {
    200: json('The registration mode every broker process uses now.', RegistrationModeBody),
    ...adminRefusals,
  },
};

/** `PUT /v1/admin/registration` */
export const switchMode = {
  tags: ['operators'],
  summary: 'Open or close registration',
  description: 'Stored in the database, so every broker process follows at once; it outlasts restarts and `REGISTRATION_MODE`.',
  security: operatorToken,
  body: RegistrationModeBody,
  response: {
    200: json('The new mode.', RegistrationModeBody),
    400: refusals.badRequest,
    415: refusals.notJson,
    ...adminRefusals,
  },
};

/** `POST /v1/admin/installations/:id/disable` */
export const disable = {
  tags: ['operators'],
  summary: 'Disable an installation',
  description:
    'Its token gets `403 installation_disabled` at once on every installation route and every broker process (not `401`, on which the app would register anew), and its open long-polls end the same way. Enabling restores everything it had. Disabling twice keeps the first time.',
  security: operatorToken,
  params: InstallationParams,
  response: {
    200: json('Disabled.', InstallationSwitch),
    400: refusals.badRequest,
    ...adminRefusals,
    404: installationNotFound,
  },
};

/** `POST /v1/admin/installations/:id/enable` */
export const enable = {
  tags: ['operators'],
  summary: 'Enable an installation again',
  description: 'Its existing token works again.',
  security: operatorToken,
  params: InstallationParams,
  response: {
    200: json('Enabled.', InstallationSwitch),
    400: refusals.badRequest,
    ...adminRefusals,
    404: installationNotFound,
  },
};

/** `POST /v1/admin/grants/:jti/revoke` */
export const revoke = {
  tags: ['operators'],
  summary: 'Revoke a grant',
  description:
    'The grant with this `jti` is refused from now on and its holder drops to `standard`. Idempotent, and possible before the grant was ever presented.',
  security: operatorToken,
  params: GrantParams,
  response: {
    200: json('Revoked (now or earlier).', Revoked),
    400: refusals.badRequest,
    ...adminRefusals,
  },
};

/**
 * `GET /v1/admin/installations`. The three list routes' schemas are functions, called when the
 * routes are registered: the reference lists components in the order their ids were first given,
 * and the pages' ids (`InstallationPage`, `GrantPage`, `AuditPage`) have always been given then,
 * after every module's own, so openapi.yaml lists them last.
 */
export const installationList = () => ({
  tags: ['operators'],
  summary: 'Find installations',
  description:
    'Newest first, `limit` at a time; pass `nextCursor` back as `cursor` for the next page. Filters combine. Tokens and token hashes are never part of an answer.',
  security: operatorToken,
  querystring: InstallationsQuery,
  response: {
    200: json('A page of installations.', pageOf(InstallationSummary).meta({ id: 'InstallationPage' })),
    400: refusals.badRequest,
    ...adminRefusals,
  },
});

/** `GET /v1/admin/installations/:id` */
export const installationShow = {
  tags: ['operators'],
  summary: 'One installation in full',
  description:
    "Plan and grant, activity, today's and the last 7 days' kept/skipped events, its queue, its triggers with status and counters, and how many connected accounts its triggers use.",
  security: operatorToken,
  params: InstallationParams,
  response: {
    200: json('The installation.', InstallationDetail),
    400: refusals.badRequest,
    ...adminRefusals,
    404: installationNotFound,
  },
};

/** `GET /v1/admin/grants`; a function, as `installationList` says. */
export const grantList = () => ({
  tags: ['operators'],
  summary: 'Find grants',
  description:
    'Grants the broker has seen presented, newest issued first, `limit` at a time (`nextCursor` → `cursor`). The grant tokens themselves are never stored.',
  security: operatorToken,
  querystring: GrantsQuery,
  response: {
    200: json('A page of grants.', pageOf(GrantEntry).meta({ id: 'GrantPage' })),
    400: refusals.badRequest,
    ...adminRefusals,
  },
});

/** `GET /v1/admin/audit`; a function, as `installationList` says. */
export const auditList = () => ({
  tags: ['operators'],
  summary: 'The audit trail',
  description: `Every operator action (disable, enable, revoke, registration switch, import, webhook secret rotation, operator key change), newest first, each written in the same transaction as the action. Kept ${settingText('AUDIT_RETENTION_DAYS')}.`,
  security: operatorToken,
  querystring: AuditQuery,
  response: {
    200: json(
      'A page of the trail.',
      z.object({ entries: z.array(AuditEntry), nextCursor: z.string().nullable() }).meta({ id: 'AuditPage' }),
    ),
    400: refusals.badRequest,
    ...adminRefusals,
  },
});
