import { eq, sql } from 'drizzle-orm';
import type { Db, DbOrTransaction } from '../db/database.js';
import { installations } from '../db/schema.js';
import { forbidden, notFound } from '../errors.js';
import { markDisabled, markEnabled } from './store.js';

/** A transaction, never the database itself: disabling's lock and notification need one. */
type Transaction = Exclude<DbOrTransaction, Db>;

export interface InstallationSwitch {
  installationId: string;
  disabledAt: string | null;
}

/**
 * The NOTIFY channel on which every broker process hears that an installation was disabled (the
 * payload is its id): its waiting polls end with `403 installation_disabled`.
 */
export const INSTALLATION_DISABLED_CHANNEL = 'omb_installation_disabled';

/**
 * The refusal of every installation route (and of a waiting poll) for an installation an
 * operator disabled. Not `401`: the existing client registers anew on `401` (and would leave its
 * accounts behind), but keeps its token on anything else and retries later, so re-enabling
 * restores it as it was.
 */
export const installationDisabled = () =>
  forbidden('this installation is disabled by the service operator; try again later', 'installation_disabled');

const unknownInstallation = () => notFound('no installation has this id', 'installation_not_found');

/**
 * Disables an installation inside the caller's transaction: from its commit on, the token gets
 * `403 installation_disabled` everywhere. The notification is sent in the same transaction, so
 * Postgres delivers it only once the update is visible and a woken poll re-checking the token
 * finds it disabled. Disabling twice keeps the first time.
 */
export async function disableInstallation(
  tx: Transaction,
  installationId: string,
  now: Date,
): Promise<InstallationSwitch & { wasDisabled: boolean }> {
  // Locked as it is read, so no other switch changes the row between reading what it was and marking it.
  const [before] = await tx
    .select({ disabledAt: installations.disabledAt })
    .from(installations)
    .where(eq(installations.id, installationId))
    .for('no key update');
  const disabledAt = await markDisabled(tx, installationId, now);
  if (!before || !disabledAt) throw unknownInstallation();
  await tx.execute(sql`select pg_notify(${INSTALLATION_DISABLED_CHANNEL}, ${installationId})`);
  return { installationId, disabledAt: disabledAt.toISOString(), wasDisabled: before.disabledAt !== null };
}

/** Lets the installation's existing token work again; says whether it was disabled. */
export async function enableInstallation(
  db: DbOrTransaction,
  installationId: string,
): Promise<InstallationSwitch & { wasDisabled: boolean }> {
  const wasDisabled = await markEnabled(db, installationId);
  if (wasDisabled === undefined) throw unknownInstallation();
  return { installationId, disabledAt: null, wasDisabled };
}
