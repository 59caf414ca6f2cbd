import { eq, sql } from 'drizzle-orm';
import type { DbOrTransaction } from '../db/database.js';
import { installations } from '../db/schema.js';
import { notFound } from '../errors.js';
import { markDisabled, markEnabled } from './store.js';

export interface InstallationSwitch {
  installationId: string;
  disabledAt: string | null;
}

/**
 * The NOTIFY channel on which every broker process hears that an installation was disabled (the
 * payload is its id): its waiting polls end with `403 installation_disabled`.
 */
export const INSTALLATION_DISABLED_CHANNEL = 'omb_installation_disabled';

const unknownInstallation = () => notFound('no installation has this id', 'installation_not_found');

/**
 * Disables an installation: from the commit on, its token gets `403 installation_disabled` everywhere. The notification
 * is sent in the same transaction, so Postgres delivers it only once the update is visible and
 * a woken poll re-checking the token finds it disabled. Disabling twice keeps the first time.
 */
export async function disableInstallation(
  db: DbOrTransaction,
  installationId: string,
  now: Date,
): Promise<InstallationSwitch & { wasDisabled: boolean }> {
  return db.transaction(async (tx) => {
    const [before] = await tx
      .select({ disabledAt: installations.disabledAt })
      .from(installations)
      .where(eq(installations.id, installationId))
      .for('no key update');
    const disabledAt = await markDisabled(tx, installationId, now);
    if (!before || !disabledAt) throw unknownInstallation();
    await tx.execute(sql`select pg_notify(${INSTALLATION_DISABLED_CHANNEL}, ${installationId})`);
    return { installationId, disabledAt: disabledAt.toISOString(), wasDisabled: before.disabledAt !== null };
  });
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
