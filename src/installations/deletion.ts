import { sql } from 'drizzle-orm';
import type { Db } from '../db/database.js';
import { deleteInstallation } from './store.js';

/**
 * The NOTIFY channel on which every broker process hears that an installation was removed (the
 * payload is its id): its waiting polls end with `401`, the answer of a poll whose token no
 * longer works.
 */
export const INSTALLATION_REMOVED_CHANNEL = 'omb_installation_removed';

/**
 * Deletes the installation's row (its triggers, queue and counters go with it by cascade) and
 * announces it in the same transaction, so Postgres delivers the notification only once the row
 * is gone: every process ends the installation's waiting polls at once, where they would
 * otherwise wait out their time before finding the token unknown.
 */
export async function deleteInstallationAndEndPolls(db: Db, installationId: string): Promise<void> {
  await db.transaction(async (tx) => {
    await deleteInstallation(tx, installationId);
    await tx.execute(sql`select pg_notify(${INSTALLATION_REMOVED_CHANNEL}, ${installationId})`);
  });
}
