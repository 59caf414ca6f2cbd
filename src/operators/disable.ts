import { sql } from 'drizzle-orm';
import type { Db } from '../db/database.js';
import { notFound } from '../errors.js';
import { INSTALLATION_DISABLED_CHANNEL } from '../events/channels.js';
import { markDisabled, markEnabled } from '../installations/store.js';

export interface InstallationSwitch {
  installationId: string;
  disabledAt: string | null;
}

const unknownInstallation = () => notFound('no installation has this id', 'installation_not_found');

/**
 * Disables an installation: from the commit on, its token gets `403 installation_disabled` everywhere. The notification
 * is sent in the same transaction, so Postgres delivers it only once the update is visible and
 * a woken poll re-checking the token finds it disabled. Disabling twice keeps the first time.
 */
export async function disableInstallation(db: Db, installationId: string, now: Date): Promise<InstallationSwitch> {
  return db.transaction(async (tx) => {
    const disabledAt = await markDisabled(tx, installationId, now);
    if (!disabledAt) throw unknownInstallation();
    await tx.execute(sql`select pg_notify(${INSTALLATION_DISABLED_CHANNEL}, ${installationId})`);
    return { installationId, disabledAt: disabledAt.toISOString() };
  });
}

/** Lets the installation's existing token work again. */
export async function enableInstallation(db: Db, installationId: string): Promise<InstallationSwitch> {
  if (!(await markEnabled(db, installationId))) throw unknownInstallation();
  return { installationId, disabledAt: null };
}
