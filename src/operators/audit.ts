import { and, desc, eq, gte, lt, lte, sql } from 'drizzle-orm';
import type { Db, DbOrTransaction, Sql } from '../db/database.js';
import { operatorAudit } from '../db/schema.js';

/**
 * The operators' audit trail: the only module that writes `operator_audit`. Every operator
 * action writes its row inside the action's own transaction (see actions.ts), so a change that
 * did not commit left no row, and a row that could not be written undid the change. The one
 * exception is a webhook secret rotation: it happens at Composio, which no rollback undoes, so
 * its row follows it.
 */

/** Who acted: an admin token's `sub` and `jti`, or an operator at the CLI. */
export interface Actor {
  readonly operator: string;
  /** The admin token's `jti`; null for the CLI and for what the broker noticed itself. */
  readonly tokenId: string | null;
  readonly source: 'api' | 'cli' | 'broker';
}

type AuditAction =
  | 'installation.disable'
  | 'installation.enable'
  | 'grant.revoke'
  | 'registration.set'
  | 'installations.import'
  | 'webhook.rotate-secret'
  | 'operator-keys.change';

export interface AuditRecord {
  readonly action: AuditAction;
  readonly target: string | null;
  readonly outcome: string;
  readonly details?: Record<string, unknown>;
}

export async function recordAudit(db: DbOrTransaction, actor: Actor, record: AuditRecord, at: Date): Promise<void> {
  await db.insert(operatorAudit).values({
    at,
    operator: actor.operator,
    tokenId: actor.tokenId,
    source: actor.source,
    action: record.action,
    target: record.target,
    outcome: record.outcome,
    details: record.details ?? {},
  });
}

export interface AuditEntry {
  id: number;
  at: string;
  operator: string;
  tokenId: string | null;
  source: Actor['source'];
  action: string;
  target: string | null;
  outcome: string;
  details: Record<string, unknown>;
}

export interface AuditQuery {
  readonly limit: number;
  /** Entries older than this id (the previous page's `nextCursor`). */
  readonly before?: number | undefined;
  readonly operator?: string | undefined;
  readonly action?: string | undefined;
  readonly target?: string | undefined;
  readonly since?: Date | undefined;
  readonly until?: Date | undefined;
}

/** Newest first. `nextCursor` is null on the last page. */
export async function listAudit(db: Db, query: AuditQuery): Promise<{ entries: AuditEntry[]; nextCursor: string | null }> {
  const conditions = [
    query.before === undefined ? undefined : lt(operatorAudit.id, query.before),
    query.operator === undefined ? undefined : eq(operatorAudit.operator, query.operator),
    query.action === undefined ? undefined : eq(operatorAudit.action, query.action),
    query.target === undefined ? undefined : eq(operatorAudit.target, query.target),
    query.since === undefined ? undefined : gte(operatorAudit.at, query.since),
    query.until === undefined ? undefined : lte(operatorAudit.at, query.until),
  ];
  const rows = await db
    .select()
    .from(operatorAudit)
    .where(and(...conditions))
    .orderBy(desc(operatorAudit.id))
    .limit(query.limit + 1);
  const page = rows.slice(0, query.limit);
  const entries = page.map((r) => ({
    id: r.id,
    at: r.at.toISOString(),
    operator: r.operator,
    tokenId: r.tokenId,
    source: r.source as Actor['source'],
    action: r.action,
    target: r.target,
    outcome: r.outcome,
    details: r.details as Record<string, unknown>,
  }));
  const last = page.at(-1);
  return { entries, nextCursor: rows.length > query.limit && last ? String(last.id) : null };
}

/** Removes entries older than `horizon`, in batches; the number removed. */
export async function removeExpiredAudit(sql: Sql, horizon: Date, batchSize = 5000): Promise<number> {
  let removed = 0;
  for (;;) {
    const [batch] = await sql<{ removed: number }[]>`
      with removed as (
        delete from operator_audit
         where id = any(array(select id from operator_audit where at < ${horizon.toISOString()}::timestamptz order by id limit ${batchSize}))
        returning 1
      )
      select count(*)::int as removed from removed`;
    removed += batch?.removed ?? 0;
    if ((batch?.removed ?? 0) < batchSize) return removed;
  }
}

/** The lock that lets one broker process at a time compare the operator keys at start. */
const KEYS_LOCK = 7_262_011_010;

/**
 * Operator keys live in configuration (`OPERATOR_PUBLIC_KEYS`), so the broker sees a change only
 * when it starts: it compares the key ids with the last ones recorded and records a change. The
 * first start with keys records them too. Never a key itself, only its `kid`.
 */
export async function noteOperatorKeys(db: Db, kids: readonly string[], at: Date): Promise<boolean> {
  const current = [...kids].sort();
  return db.transaction(async (tx) => {
    await tx.execute(sql`select pg_advisory_xact_lock(${KEYS_LOCK})`);
    const [last] = await tx
      .select({ details: operatorAudit.details })
      .from(operatorAudit)
      .where(eq(operatorAudit.action, 'operator-keys.change'))
      .orderBy(desc(operatorAudit.id))
      .limit(1);
    const previous = ((last?.details as { kids?: unknown } | undefined)?.kids ?? null) as string[] | null;
    if (previous === null && current.length === 0) return false;
    if (previous !== null && JSON.stringify(previous) === JSON.stringify(current)) return false;
    const before = new Set(previous ?? []);
    const added = current.filter((k) => !before.has(k));
    const removed = (previous ?? []).filter((k) => !current.includes(k));
    await recordAudit(
      tx,
      { operator: 'broker', tokenId: null, source: 'broker' },
      { action: 'operator-keys.change', target: 'operator-keys', outcome: 'changed', details: { kids: current, added, removed } },
      at,
    );
    return true;
  });
}
