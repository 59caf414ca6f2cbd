import type { Sql } from '../db/database.js';
import { type DataKeys, keyIds } from './keys.js';
import { sealedKeyIdSql } from './seal.js';

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

/** What the stored values are protected by, for `data-keys status`. */
export interface DataKeysStatus {
  /** Trigger events' data encrypted, by key id (the id as the value names it). */
  readonly sealedEvents: Record<string, number>;
  /** Events whose data is in clear: the broker's own and test events, and trigger events stored before encryption or beside the previous release. */
  readonly clearEvents: number;
  /** Webhook signing secrets encrypted, by key id. */
  readonly sealedWebhookSecrets: Record<string, number>;
  /** Webhook signing secrets in clear: stored beside the previous release, or not yet encrypted by a broker. */
  readonly clearWebhookSecrets: number;
  /** The key ids recorded in use (see above). */
  readonly keysInUse: string[];
}

/**
 * Counts every stored value by what protects it: a read of every event kept (7 days), for an
 * operator's command, never for a request.
 */
export async function dataKeysStatus(sql: Sql): Promise<DataKeysStatus> {
  const [events, secrets, inUse] = await Promise.all([
    sql<{ key_id: string | null; n: number }[]>`
      select ${sealedKeyIdSql(sql, 'sealed')} as key_id,
             count(*)::int as n
        from events group by 1`,
    sql<{ key_id: string | null; n: number }[]>`
      select ${sealedKeyIdSql(sql, 'sealed')} as key_id,
             count(*)::int as n
        from webhook_secrets where secret is not null or sealed is not null group by 1`,
    sql<{ key_id: string }[]>`select key_id from data_keys_in_use order by key_id`,
  ]);
  const [sealedEvents, clearEvents] = byKeyId(events);
  const [sealedWebhookSecrets, clearWebhookSecrets] = byKeyId(secrets);
  return { sealedEvents, clearEvents, sealedWebhookSecrets, clearWebhookSecrets, keysInUse: inUse.map((row) => row.key_id) };
}

/** Counts by the key id they are sealed under, and the count in clear (a null key id). */
function byKeyId(rows: readonly { key_id: string | null; n: number }[]): [Record<string, number>, number] {
  const sealed: Record<string, number> = {};
  let clear = 0;
  for (const row of rows) {
    if (row.key_id === null) clear += row.n;
    else sealed[row.key_id] = row.n;
  }
  return [sealed, clear];
}
