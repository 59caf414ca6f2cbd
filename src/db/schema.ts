import { sql } from 'drizzle-orm';
import {
  bigint,
  bigserial,
  boolean,
  check,
  customType,
  date,
  doublePrecision,
  index,
  integer,
  jsonb,
  pgSchema,
  pgTable,
  primaryKey,
  smallint,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from 'drizzle-orm/pg-core';

const ts = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });
const bytea = customType<{ data: Buffer; driverData: Buffer }>({ dataType: () => 'bytea' });

/** A desktop app or Cloud home registered with the broker. */
export const installations = pgTable('installations', {
  id: uuid('id').primaryKey(),
  /** SHA-256 (hex) of the bearer token; the token itself is never stored. */
  tokenHash: text('token_hash').notNull().unique(),
  /** `omb_<uuid without dashes>`: the installation's user in the shared Composio project. */
  composioUserId: text('composio_user_id').notNull().unique(),
  /** The installation's Tool Router Session, created on first need and reused. */
  sessionId: text('session_id'),
  sessionMcpUrl: text('session_mcp_url'),
  createdAt: ts('created_at').notNull().defaultNow(),
  lastSeenAt: ts('last_seen_at').notNull().defaultNow(),
  disabledAt: ts('disabled_at'),
  /** Position of the last event appended to this installation's queue (0: none yet). */
  lastEventPosition: bigint('last_event_position', { mode: 'number' }).notNull().default(0),
  /** Position up to which the installation has acknowledged its events. */
  ackedEventPosition: bigint('acked_event_position', { mode: 'number' }).notNull().default(0),
});

/** Runtime switches every broker process reads (registration open or closed). */
export const serviceSettings = pgTable('service_settings', {
  key: text('key').primaryKey(),
  value: jsonb('value').notNull(),
  updatedAt: ts('updated_at').notNull().defaultNow(),
});

/**
 * The signing secrets accepted on incoming webhooks: each broker's `COMPOSIO_WEBHOOK_SECRET`
 * values (stored at its start) and those rotations added, written only by
 * src/events/intake/webhook-secrets.ts. Stored in clear: the HMAC needs the secret itself.
 * A row without a secret is a rotation asked of Composio whose new secret is not known yet.
 * A row past `expires_at` is refused, even when the same secret is still in the environment.
 */
export const webhookSecrets = pgTable('webhook_secrets', {
  id: bigint('id', { mode: 'number' }).primaryKey().generatedAlwaysAsIdentity(),
  /** The secret in clear: what the previous release reads and writes, and this one while it runs. */
  secret: text('secret').unique(),
  addedAt: ts('added_at').notNull().defaultNow(),
  /** Null: accepted until the next rotation. */
  expiresAt: ts('expires_at'),
  /** The secret encrypted (src/data-keys/seal.ts), bound to its digest; `secret` is then null. */
  sealed: bytea('sealed'),
  /** The secret's SHA-256 (hex), when sealed: what tells two rows of one secret apart. */
  digest: text('digest').unique(),
});

/** Paid-plan grants, by `jti`, bound to the installation that presented them last. */
export const grants = pgTable(
  'grants',
  {
    jti: text('jti').primaryKey(),
    /** The Cloud the grant was issued to (`sub`). */
    subject: text('subject').notNull(),
    plan: text('plan').notNull(),
    holderInstallationId: uuid('holder_installation_id').references(() => installations.id, {
      onDelete: 'set null',
    }),
    issuedAt: ts('issued_at').notNull(),
    expiresAt: ts('expires_at').notNull(),
    presentedAt: ts('presented_at').notNull().defaultNow(),
  },
  (t) => [index('grants_holder_idx').on(t.holderInstallationId)],
);

export const revokedGrants = pgTable('revoked_grants', {
  jti: text('jti').primaryKey(),
  revokedAt: ts('revoked_at').notNull().defaultNow(),
});

/** An installation's subscription to a Composio trigger on one of its connected accounts. */
export const triggers = pgTable(
  'triggers',
  {
    id: uuid('id').primaryKey(),
    installationId: uuid('installation_id')
      .notNull()
      .references(() => installations.id, { onDelete: 'cascade' }),
    automationId: text('automation_id').notNull(),
    toolkit: text('toolkit').notNull(),
    triggerSlug: text('trigger_slug').notNull(),
    connectedAccountId: text('connected_account_id').notNull(),
    /** Composio's trigger instance id (`ti_…`), what webhooks name in `metadata.trigger_id`. */
    composioTriggerId: text('composio_trigger_id').notNull().unique(),
    filter: jsonb('filter').notNull().default(sql`'{}'::jsonb`),
    config: jsonb('config').notNull().default(sql`'{}'::jsonb`),
    enabled: boolean('enabled').notNull().default(true),
    /** Set when the connected account expired; cleared when the trigger is active again on a new account. */
    needsReconnectAt: ts('needs_reconnect_at'),
    /**
     * The label (Composio alias) of the account the trigger is on, when known: after a reconnect
     * under the same label the trigger moves to the new account by itself.
     */
    accountAlias: text('account_alias'),
    /** When a sign-in link under that label was last asked for while the trigger needed a reconnect. */
    reconnectAskedAt: ts('reconnect_asked_at'),
    /**
     * Set when Composio stopped the trigger by itself (`composio.trigger.disabled`, or found so by
     * the reconciliation), with Composio's reason; cleared when it runs again.
     */
    composioDisabledAt: ts('composio_disabled_at'),
    composioDisabledReason: text('composio_disabled_reason'),
    createdAt: ts('created_at').notNull().defaultNow(),
  },
  (t) => [
    uniqueIndex('triggers_installation_automation_idx').on(t.installationId, t.automationId),
    index('triggers_account_idx').on(t.connectedAccountId),
  ],
);

/**
 * Composio triggers the reconciliation found that no installation's trigger holds, since when:
 * deleted on Composio once they stayed unowned for the grace period (src/triggers/reconcile.ts).
 */
export const triggerOrphans = pgTable('trigger_orphans', {
  composioTriggerId: text('composio_trigger_id').primaryKey(),
  firstSeenAt: ts('first_seen_at').notNull().defaultNow(),
});

/**
 * The per-installation event queue. `position` is assigned under the installation row's lock,
 * so positions commit in order and stay contiguous: a poller that has seen position N never later
 * misses a smaller one, and a missing position can only have been removed by retention.
 *
 * Partitioned by UTC day on `received_at` (migrations/0011_events_by_day.sql; drizzle does not
 * model partitions): `events_pYYYYMMDD` per day, created ahead by src/events/retention/retention.ts, and
 * `events_default` for a day that has none yet. Retention drops whole days. Every key starts
 * with `installation_id`; the primary key holds `received_at` because a partitioned table's must.
 */
export const events = pgTable(
  'events',
  {
    installationId: uuid('installation_id')
      .notNull()
      .references(() => installations.id, { onDelete: 'cascade' }),
    position: bigint('position', { mode: 'number' }).notNull(),
    /** The `webhook-id` of the delivery, or a broker-made `omb:…` id for its own events. */
    id: text('id').notNull(),
    type: text('type').notNull(),
    triggerId: uuid('trigger_id'),
    automationId: text('automation_id'),
    toolkit: text('toolkit'),
    triggerSlug: text('trigger_slug'),
    connectedAccountId: text('connected_account_id'),
    receivedAt: ts('received_at').notNull().defaultNow(),
    /**
     * The event's data in clear: what the previous release wrote, and what this one writes while
     * a broker of the previous release is connected (src/events/sealing.ts). Null when sealed.
     */
    data: jsonb('data'),
    /**
     * The event's data encrypted (src/data-keys/seal.ts): the delivery's own text of `data`, byte
     * for byte, bound to the installation's Composio user and the event's id. Null when in clear.
     */
    sealed: bytea('sealed'),
  },
  (t) => [
    primaryKey({ columns: [t.installationId, t.position, t.receivedAt] }),
    /** Dedupe (migrations/functions/omb_events_seen.sql): an installation's ids, per day. */
    index('events_installation_id_id_idx').on(t.installationId, t.id),
  ],
);

/**
 * The data keys that may protect stored values (src/events/sealing.ts): a key's id is written here
 * before the first value sealed under it, so a broker started without one of them refuses to start
 * (src/data-keys/in-use.ts) instead of leaving events it cannot read.
 */
export const dataKeysInUse = pgTable('data_keys_in_use', {
  keyId: text('key_id').primaryKey(),
  since: ts('since').notNull().defaultNow(),
});

/**
 * Where the queue starts: events received before `keptSince` are past retention and no poll
 * serves them, even while the day partition holding them is still there. One row, written by
 * the retention job (src/events/retention/retention.ts) at each run; absent until the first run.
 */
export const eventRetention = pgTable('event_retention', {
  /** Always true: the table holds one row. */
  singleton: boolean('singleton').primaryKey().default(true),
  keptSince: ts('kept_since').notNull(),
  updatedAt: ts('updated_at').notNull().defaultNow(),
});

/** Kept and skipped events per installation per UTC day (the quota). */
export const dailyUsage = pgTable(
  'daily_usage',
  {
    installationId: uuid('installation_id')
      .notNull()
      .references(() => installations.id, { onDelete: 'cascade' }),
    day: date('day', { mode: 'string' }).notNull(),
    kept: integer('kept').notNull().default(0),
    skipped: integer('skipped').notNull().default(0),
    /** Whether today's `quota.exceeded` event has been queued. */
    exceededNotified: boolean('exceeded_notified').notNull().default(false),
    /** `trigger.test` events queued this day: their own allowance, never the quota. */
    testEvents: integer('test_events').notNull().default(0),
  },
  (t) => [primaryKey({ columns: [t.installationId, t.day] })],
);

/** Kept and skipped events per trigger per UTC day, shown as the trigger's `today`. */
export const triggerDailyUsage = pgTable(
  'trigger_daily_usage',
  {
    triggerId: uuid('trigger_id')
      .notNull()
      .references(() => triggers.id, { onDelete: 'cascade' }),
    day: date('day', { mode: 'string' }).notNull(),
    kept: integer('kept').notNull().default(0),
    skipped: integer('skipped').notNull().default(0),
    skippedReason: text('skipped_reason'),
  },
  (t) => [primaryKey({ columns: [t.triggerId, t.day] })],
);

/**
 * Every operator action (disable, enable, revoke, registration switch, import, secret rotation,
 * operator key change), written in the same transaction as the action itself.
 */
export const operatorAudit = pgTable(
  'operator_audit',
  {
    /** Increasing: the cursor of `GET /v1/admin/audit`. */
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    at: ts('at').notNull().defaultNow(),
    /** The admin token's `sub` (or, from the CLI, the name given with `--as`). */
    operator: text('operator').notNull(),
    /** The admin token's `jti`, when the action came with one; never the token itself. */
    tokenId: text('token_id'),
    /** `api`, `cli` or `broker` (a change the broker noticed at start, e.g. operator keys). */
    source: text('source').notNull(),
    action: text('action').notNull(),
    /** What the action was on: an installation id, a grant's jti, `registration`, … */
    target: text('target'),
    outcome: text('outcome').notNull(),
    details: jsonb('details').notNull().default(sql`'{}'::jsonb`),
  },
  (t) => [index('operator_audit_at_idx').on(t.at), index('operator_audit_target_idx').on(t.target, t.id)],
);

/** The sandbox's Composio simulator (sandbox mode only); written only by `sim/persistence.ts`. */
export const sandbox = pgSchema('sandbox');

/** The simulated project: one row. */
export const sandboxProject = sandbox.table(
  'project',
  {
    id: smallint('id').primaryKey().default(1),
    apiKey: text('api_key').notNull(),
    projectId: text('project_id').notNull(),
    orgId: text('org_id').notNull(),
    seq: integer('seq').notNull(),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [check('project_single_row', sql`${t.id} = 1`)],
);

/** Every simulated record, as the simulator holds it. */
export const sandboxRecords = sandbox.table(
  'records',
  {
    kind: text('kind').notNull(),
    id: text('id').notNull(),
    data: jsonb('data').notNull(),
  },
  (t) => [
    primaryKey({ name: 'records_pkey', columns: [t.kind, t.id] }),
    check('records_kind', sql`${t.kind} IN ('session', 'account', 'link', 'auth_config', 'trigger', 'subscription', 'mcp_session')`),
  ],
);

/**
 * The MCP session ids Composio gave each installation (`mcp-session-id` on an MCP answer): a
 * request naming any other id is answered here and never forwarded. Kept in Postgres so every
 * broker process, and a restarted one, knows them.
 */
export const mcpSessions = pgTable(
  'mcp_sessions',
  {
    installationId: uuid('installation_id')
      .notNull()
      .references(() => installations.id, { onDelete: 'cascade' }),
    mcpSessionId: text('mcp_session_id').notNull(),
    createdAt: ts('created_at').notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.installationId, t.mcpSessionId] })],
);

/**
 * Shared rate-limit counters (UNLOGGED): one fixed window per key, `<limit>:<route>:<who>`.
 * Written only by `db/counters.ts`.
 */
export const rateLimitCounters = pgTable(
  'rate_limit_counters',
  {
    key: text('key').primaryKey(),
    hits: integer('hits').notNull(),
    resetsAt: timestamp('resets_at', { withTimezone: true }).notNull(),
  },
  (t) => [index('rate_limit_counters_resets_at_idx').on(t.resetsAt)],
);

/**
 * The Composio call budget per project (UNLOGGED): a token bucket and the retry-after pause.
 * `project` is a digest of the API key. Written only by `composio/shared-budget.ts`.
 */
export const composioBudgets = pgTable('composio_budgets', {
  project: text('project').primaryKey(),
  tokens: doublePrecision('tokens').notNull(),
  refilledAt: timestamp('refilled_at', { withTimezone: true }).notNull(),
  pausedUntil: timestamp('paused_until', { withTimezone: true }).notNull(),
});

/**
 * Which version of each function file in migrations/functions/ the database holds: the runner
 * (db/functions.ts) applies a file again only when its text no longer has this hash.
 */
export const appliedFunctions = pgTable('applied_functions', {
  /** The function's name, which is also its file's name. */
  functionName: text('function_name').primaryKey(),
  /** SHA-256 (hex) of the file's text as applied. */
  sha256: text('sha256').notNull(),
  appliedAt: ts('applied_at').notNull().defaultNow(),
  /**
   * The newest release (package.json's version) whose broker applied this text or found it
   * current; `null` when written by 0.1.0, which did not record it. A broker older than the
   * newest recorded applies no function file (db/functions.ts).
   */
  release: text('release'),
});
