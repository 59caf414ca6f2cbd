import type { Db } from '../db/database.js';
import { triggerNotFound } from './errors.js';
import { selectTriggerViews } from './store.js';
import type { TriggerView } from './view.js';

/** The installation's triggers in the order they were created, with `day`'s counts. */
export async function listTriggers(db: Db, installationId: string, day: string): Promise<{ triggers: TriggerView[] }> {
  return { triggers: await selectTriggerViews(db, installationId, day) };
}

/** One of the installation's triggers; any other id is not found. */
export async function getTrigger(db: Db, installationId: string, id: string, day: string): Promise<TriggerView> {
  const [trigger] = await selectTriggerViews(db, installationId, day, id);
  if (!trigger) throw triggerNotFound();
  return trigger;
}
