import { sql } from 'drizzle-orm';
import { bigint, boolean, date, index, integer, jsonb, pgTable, primaryKey, text, timestamp, uniqueIndex, uuid } from 'drizzle-orm/pg-core';

const ts = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });

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
    /** Set when the connected account expired; cleared when a new trigger replaces it. */
    needsReconnectAt: ts('needs_reconnect_at'),
    createdAt: ts('created_at').notNull().defaultNow(),
  },
  (t) => [
    uniqueIndex('triggers_installation_automation_idx').on(t.installationId, t.automationId),
    index('triggers_account_idx').on(t.connectedAccountId),
  ],
);

/**
 * The per-installation event queue. `position` is assigned under the installation row's lock,
 * so positions commit in order and stay contiguous: a poller that has seen position N never later
 * misses a smaller one, and a missing position can only have been removed by retention.
 *
 * Partitioned by UTC day on `received_at` (migrations/0011_events_by_day.sql; drizzle does not
 * model partitions): `events_pYYYYMMDD` per day, created ahead by src/events/retention.ts, and
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
    data: jsonb('data').notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.installationId, t.position, t.receivedAt] }),
    /** Dedupe (migrations/functions/omb_event_seen.sql): an installation's ids, per day. */
    index('events_installation_id_id_idx').on(t.installationId, t.id),
  ],
);

/**
 * Where the queue starts: events received before `keptSince` are past retention and no poll
 * serves them, even while the day partition holding them is still there. One row, written by
 * the retention job (src/events/retention.ts) at each run; absent until the first run.
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
