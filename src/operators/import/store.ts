import type { Db } from '../../db/database.js';
import { existingInstallationIds, insertImportedInstallations, tokenHashHolders } from '../../installations/store.js';
import { type Actor, recordAudit } from '../audit.js';
import type { FirstVersionInstallation } from './rows.js';

export interface ImportOutcome {
  imported: number;
  /** Rows whose installation is already here (an earlier run of the same import). */
  skipped: { where: string; id: string }[];
  /** Rows that cannot be imported because of what is already here. */
  refused: { where: string; problem: string }[];
}

/** Postgres takes at most 65,535 parameters a statement; rows have seven. */
const BATCH = 1000;

/** Marks the rollback of a dry run, which drizzle reports by throwing. */
class DryRunRollback extends Error {}

/**
 * Inserts the installations in one transaction: all of them or, on any error, none. Only token
 * hashes move, so every first-version token keeps working. A row whose id is already here is
 * skipped; one whose token hash belongs to another installation is refused.
 */
export async function importInstallations(
  db: Db,
  rows: readonly { where: string; row: FirstVersionInstallation }[],
  options: {
    dryRun?: boolean;
    /** Recorded in the audit trail in the import's own transaction (a dry run records nothing). */
    audit?: { actor: Actor; at: Date; file: string; invalid: number };
  } = {},
): Promise<ImportOutcome> {
  const outcome: ImportOutcome = { imported: 0, skipped: [], refused: [] };
  try {
    await db.transaction(async (tx) => {
      for (let start = 0; start < rows.length; start += BATCH) {
        const batch = rows.slice(start, start + BATCH);
        const [existingIds, hashOwners] = await Promise.all([
          existingInstallationIds(
            tx,
            batch.map((r) => r.row.id),
          ),
          tokenHashHolders(
            tx,
            batch.map((r) => r.row.tokenHash),
          ),
        ]);

        const insert: FirstVersionInstallation[] = [];
        for (const { where, row } of batch) {
          if (existingIds.has(row.id)) outcome.skipped.push({ where, id: row.id });
          else if (hashOwners.has(row.tokenHash))
            outcome.refused.push({ where, problem: 'its token_hash belongs to another installation' });
          else insert.push(row);
        }
        if (insert.length === 0) continue;
        const done = await insertImportedInstallations(tx, insert);
        outcome.imported += done.size;
        // Inserted meanwhile by someone else: already here, like the skipped ones.
        const attempted = new Set(insert);
        for (const { where, row } of batch) {
          if (attempted.has(row) && !done.has(row.id)) outcome.skipped.push({ where, id: row.id });
        }
      }
      if (options.dryRun) throw new DryRunRollback();
      if (options.audit) {
        const { actor, at, file, invalid } = options.audit;
        const refused = outcome.refused.length + invalid;
        await recordAudit(
          tx,
          actor,
          {
            action: 'installations.import',
            target: null,
            outcome: `imported ${outcome.imported}, skipped ${outcome.skipped.length}, invalid ${refused}`,
            details: { file, rows: rows.length + invalid, imported: outcome.imported, skipped: outcome.skipped.length, invalid: refused },
          },
          at,
        );
      }
    });
  } catch (error) {
    if (!(error instanceof DryRunRollback)) throw error;
  }
  return outcome;
}
