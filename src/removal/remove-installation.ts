import type { Logger } from 'pino';
import type { ComposioGateway } from '../composio/index.js';
import { revokeAllAccounts } from '../connectors/disconnect.js';
import type { Db } from '../db/database.js';
import { deleteInstallationAndEndPolls } from '../installations/deletion.js';
import type { Installation } from '../installations/installations.js';
import { deleteInstallationTriggers } from '../triggers/delete.js';

/**
 * Removes an installation the way `DELETE /v1/me` promises: its triggers on Composio first (no
 * more events), then its connected accounts (revoked at the provider), then its row with its
 * queue, which ends its waiting polls at once on every broker process. A Composio failure stops
 * before the row goes, so the client can simply try again and nothing is left connected in the
 * shared project.
 *
 * It spans three features (triggers, connected apps, installations), so it sits above all three
 * rather than inside one of them: `DELETE /v1/me` gets it from the app as a dependency.
 */
export async function removeInstallation(
  db: Db,
  composio: ComposioGateway,
  installation: Pick<Installation, 'id' | 'composioUserId'>,
  logger: Logger,
): Promise<void> {
  const log = logger.child({ installationId: installation.id });
  const { deleted } = await deleteInstallationTriggers(db, composio, installation.id, log);
  const revoked = await revokeAllAccounts(composio, installation.composioUserId);
  await deleteInstallationAndEndPolls(db, installation.id);
  log.info({ triggersDeleted: deleted, accountsRevoked: revoked }, 'installation removed with its triggers and accounts');
}
