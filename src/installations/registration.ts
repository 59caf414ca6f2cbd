import { eq } from 'drizzle-orm';
import type { DbOrTransaction } from '../db/database.js';
import { serviceSettings } from '../db/schema.js';

export type RegistrationMode = 'open' | 'closed';

const KEY = 'registration_mode';

/**
 * Whether new installations may register. An operator's switch is stored in the database so
 * every broker process sees it at once; until an operator sets one, `REGISTRATION_MODE` decides.
 */
export async function registrationMode(db: DbOrTransaction, configured: RegistrationMode): Promise<RegistrationMode> {
  const rows = await db.select({ value: serviceSettings.value }).from(serviceSettings).where(eq(serviceSettings.key, KEY));
  const stored = rows[0]?.value;
  return stored === 'open' || stored === 'closed' ? stored : configured;
}

export async function setRegistrationMode(db: DbOrTransaction, mode: RegistrationMode): Promise<void> {
  await db
    .insert(serviceSettings)
    .values({ key: KEY, value: mode })
    .onConflictDoUpdate({ target: serviceSettings.key, set: { value: mode, updatedAt: new Date() } });
}
