import type { Sql } from '../db/database.js';
import { type DataKeys, keyIds } from './keys.js';

/**
 * Which data keys may protect stored values. A key's id is recorded (`data_keys_in_use`) before
 * the first value is sealed under it; a broker whose keys leave out a recorded id refuses to start
 * (`missingKeyIds` at start, src/main.ts), changing nothing, rather than serve without the events
 * it cannot read, or seal new ones under a key the other processes do not have.
 */
export async function recordKeyInUse(sql: Sql, keys: DataKeys): Promise<void> {
  await sql`insert into data_keys_in_use (key_id) values (${keys.current.id}) on conflict do nothing`;
}

/** The recorded key ids that `keys` does not hold, in order. */
export async function missingKeyIds(sql: Sql, keys: DataKeys): Promise<string[]> {
  const rows = await sql<{ key_id: string }[]>`select key_id from data_keys_in_use order by key_id`;
  const configured = new Set(keyIds(keys));
  return rows.map((row) => row.key_id).filter((id) => !configured.has(id));
}

/** Stored values may be sealed under keys this process was not given: it starts no further. */
export class MissingDataKeys extends Error {
  override name = 'MissingDataKeys';
  constructor(readonly ids: string[]) {
    super(
      `DATA_ENCRYPTION_KEYS: stored values may be encrypted under the key id(s) ${ids.join(', ')}, which are not configured; ` +
        'give every process the same keys (add them after the one that encrypts). Nothing was changed.',
    );
  }
}
