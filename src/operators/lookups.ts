import type postgres from 'postgres';
import { utcDay } from '../clock.js';
import type { Db, Sql } from '../db/database.js';
import { badRequest, notFound } from '../errors.js';
import { type QueueFigures, queueBacklog, queueFigures } from '../events/queue/queue.js';
import { type GrantFilters, presentedGrants } from '../plans/store.js';
import { recentUsage } from '../plans/usage.js';
import { selectTriggerViews } from '../triggers/store.js';
import type { TriggerView } from '../triggers/view.js';

/**
 * What operators look up: one installation in full, and installations and grants by filters,
 * newest first, a page at a time. Token hashes and session URLs are never selected, so no answer
 * built here can carry one.
 */

export const MAX_PAGE = 200;
const DAY_MS = 86_400_000;

interface GrantSummary {
  jti: string;
  subject: string;
  plan: string;
  issuedAt: string;
  expiresAt: string;
  revokedAt: string | null;
}

export interface InstallationSummary {
  id: string;
  createdAt: string;
  lastSeenAt: string;
  disabledAt: string | null;
  plan: 'standard' | 'paid';
  /** The grant this installation holds (the latest-expiring one), if any, usable or not. */
  grant: GrantSummary | null;
}

export interface InstallationDetail extends InstallationSummary {
  events: {
    today: { day: string; kept: number; skipped: number; tests: number };
    last7Days: { from: string; kept: number; skipped: number };
  };
  queue: QueueFigures;
  triggers: TriggerView[];
  /** Distinct connected accounts its triggers use: the accounts the broker itself knows of. */
  connectedAccounts: number;
}

export interface InstallationFilters {
  disabled?: boolean | undefined;
  plan?: 'standard' | 'paid' | undefined;
  lastSeenBefore?: Date | undefined;
  lastSeenAfter?: Date | undefined;
  grantSubject?: string | undefined;
}

export interface GrantEntry extends GrantSummary {
  holderInstallationId: string | null;
  presentedAt: string;
}

export interface Page<T> {
  items: T[];
  nextCursor: string | null;
}

/** A page position: the sort key of the last row, as Postgres wrote it (microseconds kept), and its id. */
function encodeCursor(key: string, id: string): string {
  return Buffer.from(JSON.stringify([key, id]), 'utf8').toString('base64url');
}

/** How Postgres writes a `timestamptz` as text (DateStyle ISO): `2026-12-01 11:28:43.952648+00`. */
const POSTGRES_TIMESTAMP = /^(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})(\.\d{1,6})?[+-]\d{2}(:\d{2}){0,2}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A real calendar time in Postgres's text form, so the cast in the query cannot fail. */
function isPostgresTimestamp(key: string): boolean {
  const match = POSTGRES_TIMESTAMP.exec(key);
  if (!match) return false;
  const [year, month, day, hour, minute, second] = match.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const date = new Date(Date.UTC(year, month - 1, day));
  return (
    year >= 1 &&
    date.getUTCFullYear() === year &&
    date.getUTCMonth() === month - 1 &&
    date.getUTCDate() === day &&
    hour < 24 &&
    minute < 60 &&
    second < 60
  );
}

/**
 * A cursor this list gave out, or `400 invalid_cursor`: anything else (a forged or damaged one)
 * is refused here rather than reaching Postgres, whose casts would fail with a 500.
 */
function decodeCursor(cursor: string | undefined, idKind: 'uuid' | 'text'): { key: string; id: string } | null {
  if (cursor === undefined) return null;
  try {
    const value: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (Array.isArray(value) && value.length === 2 && typeof value[0] === 'string' && typeof value[1] === 'string') {
      const [key, id] = value as [string, string];
      const idFits = idKind === 'uuid' ? UUID.test(id) : id.length > 0 && id.length <= 256;
      if (isPostgresTimestamp(key) && idFits) return { key, id };
    }
  } catch {
    // answered below
  }
  throw badRequest('query.cursor: not a cursor this list gave out', 'invalid_cursor');
}

const iso = (value: Date | string) => new Date(value).toISOString();
const isoOrNull = (value: Date | string | null) => (value === null ? null : iso(value));

interface SummaryRow {
  id: string;
  created_at: Date;
  created_key: string;
  last_seen_at: Date;
  disabled_at: Date | null;
  paid: boolean;
  jti: string | null;
  subject: string | null;
  grant_plan: string | null;
  issued_at: Date | null;
  expires_at: Date | null;
  revoked_at: Date | null;
}

function toSummary(row: SummaryRow): InstallationSummary {
  return {
    id: row.id,
    createdAt: iso(row.created_at),
    lastSeenAt: iso(row.last_seen_at),
    disabledAt: isoOrNull(row.disabled_at),
    plan: row.paid ? 'paid' : 'standard',
    grant:
      row.jti === null
        ? null
        : {
            jti: row.jti,
            subject: row.subject!,
            plan: row.grant_plan!,
            issuedAt: iso(row.issued_at!),
            expiresAt: iso(row.expires_at!),
            revokedAt: isoOrNull(row.revoked_at),
          },
  };
}

/** Distinct connected accounts the installation's triggers use. */
const connectedAccounts = (sql: Sql) =>
  sql`(select count(distinct t.connected_account_id)::int from triggers t where t.installation_id = i.id)`;

/**
 * Installations with the plan they are on at `at` and the grant they hold (the latest-expiring
 * one): the one statement behind both the list and the detail. `where` and `rest` (order, limit)
 * narrow it; `accounts` adds the detail's count of connected accounts.
 */
function selectSummaries<Row extends SummaryRow>(
  sql: Sql,
  at: string,
  query: { accounts?: boolean; where: postgres.Fragment; rest?: postgres.Fragment },
) {
  return sql<Row[]>`
    select i.id, i.created_at, i.created_at::text as created_key, i.last_seen_at, i.disabled_at,
           (p.installation_id is not null) as paid,
           g.jti, g.subject, g.plan as grant_plan, g.issued_at, g.expires_at, r.revoked_at
           ${query.accounts ? sql`, ${connectedAccounts(sql)} as accounts` : sql``}
      from installations i
      left join omb_paid_plans(${at}::timestamptz) p on p.installation_id = i.id
      left join lateral (
        select * from grants g where g.holder_installation_id = i.id order by g.expires_at desc, g.jti limit 1
      ) g on true
      left join revoked_grants r on r.jti = g.jti
     where ${query.where}
     ${query.rest ?? sql``}`;
}

/** Installations by filters, newest first. */
export async function listInstallations(
  sql: Sql,
  now: Date,
  filters: InstallationFilters,
  page: { limit: number; cursor?: string | undefined },
): Promise<Page<InstallationSummary>> {
  const after = decodeCursor(page.cursor, 'uuid');
  const rows = await selectSummaries(sql, now.toISOString(), {
    where: sql`true
       ${filters.disabled === undefined ? sql`` : filters.disabled ? sql`and i.disabled_at is not null` : sql`and i.disabled_at is null`}
       ${filters.plan === undefined ? sql`` : filters.plan === 'paid' ? sql`and p.installation_id is not null` : sql`and p.installation_id is null`}
       ${filters.lastSeenBefore === undefined ? sql`` : sql`and i.last_seen_at < ${filters.lastSeenBefore.toISOString()}::timestamptz`}
       ${filters.lastSeenAfter === undefined ? sql`` : sql`and i.last_seen_at > ${filters.lastSeenAfter.toISOString()}::timestamptz`}
       ${
         filters.grantSubject === undefined
           ? sql``
           : sql`and exists (select 1 from grants s where s.holder_installation_id = i.id and s.subject = ${filters.grantSubject})`
       }
       ${after === null ? sql`` : sql`and (i.created_at, i.id) < (${after.key}::timestamptz, ${after.id}::uuid)`}`,
    rest: sql`order by i.created_at desc, i.id desc limit ${page.limit + 1}`,
  });
  const items = rows.slice(0, page.limit);
  const last = items.at(-1);
  return {
    items: items.map(toSummary),
    nextCursor: rows.length > page.limit && last ? encodeCursor(last.created_key, last.id) : null,
  };
}

/** One installation in full; `404` for an unknown id. */
export async function installationDetail(db: Db, id: string, now: Date): Promise<InstallationDetail> {
  const sql = db.$client;
  const day = utcDay(now);
  const from = utcDay(new Date(now.getTime() - 6 * DAY_MS));
  const [rows, usage, backlog, triggers] = await Promise.all([
    selectSummaries<SummaryRow & { accounts: number }>(sql, now.toISOString(), { accounts: true, where: sql`i.id = ${id}` }),
    recentUsage(db, id, from, day),
    queueBacklog(sql, id),
    selectTriggerViews(db, id, day),
  ]);
  const row = rows[0];
  if (!row) throw notFound('no installation has this id', 'installation_not_found');
  return {
    ...toSummary(row),
    events: { today: { day, ...usage.today }, last7Days: { from, ...usage.days } },
    queue: queueFigures(backlog, now),
    triggers,
    connectedAccounts: row.accounts,
  };
}

/**
 * Grants the broker has seen presented, each with its revocation if any, newest first. A grant
 * revoked before it was ever presented has no row here: only its jti is known (`revoked_grants`).
 */
export async function listGrants(
  db: Db,
  now: Date,
  filters: GrantFilters,
  page: { limit: number; cursor?: string | undefined },
): Promise<Page<GrantEntry>> {
  const after = decodeCursor(page.cursor, 'text');
  const rows = await presentedGrants(db, now, filters, {
    limit: page.limit + 1,
    after: after === null ? null : { key: after.key, jti: after.id },
  });
  const items = rows.slice(0, page.limit);
  const last = items.at(-1);
  return {
    items: items.map((g) => ({
      jti: g.jti,
      subject: g.subject,
      plan: g.plan,
      holderInstallationId: g.holderInstallationId,
      issuedAt: iso(g.issuedAt),
      expiresAt: iso(g.expiresAt),
      presentedAt: iso(g.presentedAt),
      revokedAt: isoOrNull(g.revokedAt),
    })),
    nextCursor: rows.length > page.limit && last ? encodeCursor(last.issuedKey, last.jti) : null,
  };
}
