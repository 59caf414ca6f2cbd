import type { BaseLogger } from 'pino';
import { type ComposioGateway, isComposioFailure, isComposioNotFound } from '../composio/index.js';
import type { Db } from '../db/database.js';
import { AppError } from '../errors.js';
import type { TriggerDeps } from './create.js';
import { triggerNotFound } from './errors.js';
import { deleteTriggerRow, findTrigger, listInstallationTriggers } from './store.js';

/** How many Composio deletions run at once when an installation is removed. */
const REMOVAL_CONCURRENCY = 4;

/**
 * Deletes one of the installation's triggers: on Composio first (already gone there is fine),
 * then the row, so a failure leaves the trigger listed and the client can simply retry.
 */
export async function deleteTrigger(deps: TriggerDeps, installationId: string, id: string): Promise<void> {
  const row = await findTrigger(deps.db, installationId, id);
  if (!row) throw triggerNotFound();
  await deleteOnComposio(deps.composio, row.composioTriggerId);
  await deleteTriggerRow(deps.db, installationId, id);
  deps.log.info({ installationId, triggerId: id, composioTriggerId: row.composioTriggerId }, 'trigger deleted');
}

/**
 * Deletes all of an installation's triggers on Composio, for the installation's removal. Every
 * trigger is tried; each one deleted on Composio loses its row at once, so a second attempt only
 * retries what failed. A failure is logged per trigger and the first one is rethrown at the end,
 * for the caller to decide whether the removal goes on.
 */
export async function deleteInstallationTriggers(
  db: Db,
  composio: ComposioGateway,
  installationId: string,
  log: Pick<BaseLogger, 'warn'>,
): Promise<{ deleted: number }> {
  const pending = await listInstallationTriggers(db, installationId);
  let deleted = 0;
  let firstFailure: unknown;

  async function worker(): Promise<void> {
    for (let row = pending.shift(); row !== undefined; row = pending.shift()) {
      try {
        await deleteOnComposio(composio, row.composioTriggerId);
        await deleteTriggerRow(db, installationId, row.id);
        deleted += 1;
      } catch (error) {
        firstFailure ??= error;
        log.warn(
          {
            installationId,
            triggerId: row.id,
            composioTriggerId: row.composioTriggerId,
            code: isComposioFailure(error) || error instanceof AppError ? error.code : 'unknown',
            cause: error instanceof Error ? error.message : String(error),
          },
          'could not delete a trigger of a removed installation',
        );
      }
    }
  }
  await Promise.all(Array.from({ length: REMOVAL_CONCURRENCY }, worker));
  if (firstFailure !== undefined) throw firstFailure;
  return { deleted };
}

/** A Composio trigger that is already gone counts as deleted. */
async function deleteOnComposio(composio: ComposioGateway, composioTriggerId: string): Promise<void> {
  try {
    await composio.deleteTrigger(composioTriggerId);
  } catch (error) {
    if (!isComposioNotFound(error)) throw error;
  }
}
