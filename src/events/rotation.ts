import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { recordKeyInUse } from '../data-keys/in-use.js';
import type { DataKeys } from '../data-keys/keys.js';
import { open, SealError, seal, sealedKeyIdSql } from '../data-keys/seal.js';
import type { Sql } from '../db/database.js';
import type { QueuedEventType } from './event.js';
import { resealSecrets } from './intake/webhook-secrets.js';
import { boundTo, previousReleaseConnected, type Sealing } from './sealing.js';

/** Rows read and written back in one transaction: short enough that serving brokers never wait long behind one. */
export const DEFAULT_ROTATION_BATCH = 500;

export interface RotationBatch {
  /** Events' data sealed under another key, sealed again under the current one. */
  readonly resealed: number;
  /** Events' data stored in clear (trigger events before encryption or beside the previous release, the broker's own and test events), sealed now. */
  readonly sealedFromClear: number;
  /** Values that did not open (a key not given, or not sealed for their row): left as they are. */
  readonly unreadable: number;
}

export interface RotationResult extends RotationBatch {
  /** Events' data left in clear because a broker of the previous release is connected (it reads only clear data). */
  readonly leftInClear: number;
  /** The key ids no stored value is under any more, taken out of `data_keys_in_use`: brokers may now start without them. */
  readonly retired: string[];
}

/**
 * Seals every event's data, and every webhook signing secret, under the current data key (`DATA_ENCRYPTION_KEYS`' first), while
 * brokers serve: what is sealed under another key is opened and sealed again, and what is in clear
 * (trigger events stored before encryption; the broker's own and test events, which the database
 * functions write in clear) is sealed, bound to its row as a trigger event's is, unless a broker
 * of the previous release is connected (it reads only clear data). In batches of `batchSize` rows, each one transaction that writes a row only if it
 * is still what was read, going through the events in their key's order: killed, it is started
 * again and finds only what is left. A value that does not open is left as it is and counted.
 *
 * Once none is left under a key, that key's id leaves `data_keys_in_use`, so brokers may be given
 * the keys without it. The current key is recorded in use before anything is sealed under it.
 */
export async function rotateEventData(
  sql: Sql,
  keys: DataKeys,
  options: {
    batchSize?: number;
    onBatch?: (batch: RotationBatch, total: RotationBatch) => void;
    signal?: AbortSignal;
    /** `clear`: only events stored in clear, and no key retired (a broker's own pass, `sealStoredInClear`). */
    scope?: 'all' | 'clear';
    /** A pause between batches, leaving Postgres to the requests. */
    pauseMs?: number;
  } = {},
): Promise<RotationResult> {
  const batchSize = options.batchSize ?? DEFAULT_ROTATION_BATCH;
  const all = options.scope !== 'clear';
  await recordKeyInUse(sql, keys);
  const sealClear = !(await previousReleaseConnected(sql));
  const current = keys.current.id;
  const total = { resealed: 0, sealedFromClear: 0, unreadable: 0 };
  let after: { installationId: string; position: string; receivedAt: string } | undefined;
  for (;;) {
    options.signal?.throwIfAborted();
    const rows = await sql<StoredRow[]>`
      select e.installation_id, e.position::text as position, e.received_at::text as received_at, e.id, e.sealed,
             case when e.sealed is null then e.data::text end as data_text, i.composio_user_id
        from events e join installations i on i.id = e.installation_id
       where (${all} or e.sealed is null)
         and (${after === undefined} or (e.installation_id, e.position, e.received_at)
              > (${after?.installationId ?? null}::uuid, ${after?.position ?? null}::bigint, ${after?.receivedAt ?? null}::timestamptz))
         and case when e.sealed is null then e.data is not null and ${sealClear}
                  else ${sealedKeyIdSql(sql, 'e.sealed')} <> ${current} end
       order by e.installation_id, e.position, e.received_at
       limit ${batchSize}`;
    if (rows.length === 0) break;
    const last = rows.at(-1)!;
    after = { installationId: last.installation_id, position: last.position, receivedAt: last.received_at };

    const batch = await sealRows(sql, keys, rows);
    total.resealed += batch.resealed;
    total.sealedFromClear += batch.sealedFromClear;
    total.unreadable += batch.unreadable;
    options.onBatch?.(batch, { ...total });
    if (options.pauseMs) await sleep(options.pauseMs, undefined, { signal: options.signal });
  }
  if (!all) return { ...total, leftInClear: 0, retired: [] };
  const secrets = await resealSecrets(sql, keys, sealClear);
  total.resealed += secrets.resealed;
  total.sealedFromClear += secrets.sealedFromClear;
  total.unreadable += secrets.unreadable;

  const [left] = await sql<{ n: number }[]>`
    select ((select count(*) from events where sealed is null and data is not null)
         + (select count(*) from webhook_secrets where secret is not null))::int as n`;
  const retired = await sql<{ key_id: string }[]>`
    delete from data_keys_in_use k
     where k.key_id <> ${current}
       and not exists (select 1 from events e
                        where e.sealed is not null
                          and ${sealedKeyIdSql(sql, 'e.sealed')} = k.key_id)
       and not exists (select 1 from webhook_secrets w
                        where w.sealed is not null
                          and ${sealedKeyIdSql(sql, 'w.sealed')} = k.key_id)
    returning k.key_id`;
  return { ...total, leftInClear: left?.n ?? 0, retired: retired.map((row) => row.key_id).sort() };
}

/** An event as read to be sealed: where it is, its sealed bytes or its clear data's text, and what it is bound to. */
interface StoredRow {
  installation_id: string;
  position: string;
  received_at: string;
  id: string;
  sealed: Buffer | null;
  data_text: string | null;
  composio_user_id: string;
}

/**
 * Seals each row's data under the current key (opened first when sealed under another), bound to
 * its row, and writes it where the row still holds what was read: a row acknowledged and removed,
 * or sealed by another process meanwhile, is left alone. A value that does not open is counted.
 */
async function sealRows(sql: Sql, keys: DataKeys, rows: readonly StoredRow[]): Promise<RotationBatch> {
  const batch = { resealed: 0, sealedFromClear: 0, unreadable: 0 };
  const writes: { installationId: string; position: string; receivedAt: string; was: string | null; sealed: string }[] = [];
  for (const row of rows) {
    const bound = boundTo(row.composio_user_id, row.id);
    let text: Buffer | string;
    if (row.sealed === null) text = row.data_text!;
    else {
      try {
        text = open(keys, row.sealed, bound);
      } catch (error) {
        if (!(error instanceof SealError)) throw error;
        batch.unreadable++;
        continue;
      }
    }
    writes.push({
      installationId: row.installation_id,
      position: row.position,
      receivedAt: row.received_at,
      was: row.sealed?.toString('base64') ?? null,
      sealed: seal(keys, text, bound).toString('base64'),
    });
  }
  if (writes.length > 0) {
    // Written only where the row still holds what was read (a row acknowledged and removed, or
    // sealed again by another run meanwhile, is left alone).
    const written = await sql<{ cleared: boolean }[]>`
      update events e set sealed = decode(v.sealed, 'base64'), data = null
        from unnest(${writes.map((w) => w.installationId)}::text[], ${writes.map((w) => w.position)}::text[],
                    ${writes.map((w) => w.receivedAt)}::text[], ${writes.map((w) => w.was)}::text[],
                    ${writes.map((w) => w.sealed)}::text[]) as v(installation_id, position, received_at, was, sealed)
       where e.installation_id = v.installation_id::uuid and e.position = v.position::bigint
         and e.received_at = v.received_at::timestamptz
         and e.sealed is not distinct from decode(v.was, 'base64')
      returning v.was is null as cleared`;
    for (const row of written) {
      if (row.cleared) batch.sealedFromClear++;
      else batch.resealed++;
    }
  }
  return batch;
}

/**
 * A broker's own pass over the events stored in clear (before this release, or while a broker of
 * the previous release was connected), once the previous release has gone: each sealed under the
 * current key, in small batches with a pause between them, until none is left. Every process that
 * saw the previous release go makes the pass; a row is written only where unchanged, so two at
 * once only share the work. Logged when it sealed any.
 */
export async function sealStoredInClear(sql: Sql, keys: DataKeys, log: Logger, signal: AbortSignal): Promise<void> {
  const result = await rotateEventData(sql, keys, { scope: 'clear', batchSize: 200, pauseMs: 50, signal });
  if (result.sealedFromClear > 0) {
    log.info({ sealed: result.sealedFromClear, unreadable: result.unreadable }, 'events stored in clear are now encrypted');
  }
}

/** Rows of one installation sealed in one statement: more wait for the next round. */
const INSTALLATION_BATCH = 100;

/**
 * The broker's own events (`quota.exceeded`, `connection.expired`, `trigger.disabled`) and test
 * events are written by database functions the previous release shares, which store their data
 * in clear: so once one is queued and committed, the process that queued it seals its
 * installation's events stored in clear (read by the installation's own key, in the background,
 * a few milliseconds later). Not while a broker of the previous release may be connected (it
 * reads only clear data); a process stopped before it sealed one leaves it to the next event of
 * that installation, to the pass after an upgrade, or to `data-keys rotate`.
 */
export class QueuedInClearSealer {
  private readonly pending = new Set<string>();
  private running: Promise<void> | undefined;
  private stopped = false;

  constructor(
    private readonly sql: Sql,
    private readonly sealing: Sealing,
    private readonly log: Logger,
  ) {}

  /** An event of `type` was queued for `installationId` and committed (EventNotifier's listener). */
  queued(installationId: string, type: QueuedEventType): void {
    // A trigger event is sealed as it is written, whenever this process seals.
    if (type === 'trigger.event' || this.stopped || !this.sealing.sealing()) return;
    this.pending.add(installationId);
    this.drain();
  }

  /** Waits for the round under way; what is still pending is left (see above). */
  async stop(): Promise<void> {
    this.stopped = true;
    this.pending.clear();
    await this.running;
  }

  private drain(): void {
    if (this.running || this.pending.size === 0) return;
    const installationId = this.pending.values().next().value!;
    this.pending.delete(installationId);
    this.running = this.sealInstallation(installationId)
      .catch((err: unknown) =>
        this.log.warn({ err, installationId }, 'could not encrypt an event stored in clear; the next event of the installation will'),
      )
      .finally(() => {
        this.running = undefined;
        this.drain();
      });
  }

  private async sealInstallation(installationId: string): Promise<void> {
    for (;;) {
      const rows = await this.sql<StoredRow[]>`
        select e.installation_id, e.position::text as position, e.received_at::text as received_at, e.id,
               null::bytea as sealed, e.data::text as data_text, i.composio_user_id
          from events e join installations i on i.id = e.installation_id
         where e.installation_id = ${installationId} and e.sealed is null and e.data is not null
         limit ${INSTALLATION_BATCH}`;
      if (rows.length === 0) return;
      const { sealedFromClear } = await sealRows(this.sql, this.sealing.keys, rows);
      // A full batch means more may be left; one that sealed nothing would only be read again.
      if (rows.length < INSTALLATION_BATCH || sealedFromClear === 0 || this.stopped) return;
    }
  }
}
