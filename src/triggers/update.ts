import { isComposioNotFound } from '../composio/index.js';
import { conflict } from '../errors.js';
import type { TriggerDeps } from './create.js';
import { triggerNotFound } from './errors.js';
import { getTrigger } from './list.js';
import { findTrigger, setTriggerRowEnabled } from './store.js';
import type { TriggerView } from './view.js';

/**
 * Pauses or resumes one of the installation's triggers: on Composio first, so the stored state
 * never claims events are paused while Composio still sends them. Switching to the state it is
 * already in still asks Composio, which repairs a trigger someone changed on Composio directly;
 * Composio's `409` "already enabled/disabled" then counts as done (in the gateway). Resuming a
 * trigger Composio stopped by itself asks it to run again, and clears the stop.
 */
export async function setTriggerEnabled(
  deps: TriggerDeps,
  installationId: string,
  id: string,
  enabled: boolean,
  day: string,
): Promise<TriggerView> {
  const row = await findTrigger(deps.db, installationId, id);
  if (!row) throw triggerNotFound();
  try {
    await deps.composio.setTriggerEnabled(row.composioTriggerId, enabled);
  } catch (error) {
    if (isComposioNotFound(error)) {
      throw conflict('this trigger no longer exists on Composio; delete it and create it again', 'trigger_gone');
    }
    throw error;
  }
  if (!(await setTriggerRowEnabled(deps.db, installationId, id, enabled))) throw triggerNotFound();
  deps.log.info({ installationId, triggerId: id, enabled }, enabled ? 'trigger resumed' : 'trigger paused');
  return getTrigger(deps.db, installationId, id, day);
}
