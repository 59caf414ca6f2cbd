import { createHash } from 'node:crypto';
import { eq, sql } from 'drizzle-orm';
import type { ComposioGateway } from '../../composio/types.js';
import type { DataKeys } from '../../data-keys/keys.js';
import { open, SealError, seal, sealedKeyIdSql } from '../../data-keys/seal.js';
import type { Db, Sql } from '../../db/database.js';
import { webhookSecrets } from '../../db/schema.js';
import { previousReleaseConnected } from '../sealing.js';

/**
 * The webhook signing secrets every broker process accepts, and their rotation. The only module
 * that writes `webhook_secrets`.
 *
 * Accepted: every `COMPOSIO_WEBHOOK_SECRET` value, and every stored secret that has not expired;
 * a stored secret past its `expires_at` is refused, even when it is still in the environment.
 * Each broker stores its own `COMPOSIO_WEBHOOK_SECRET` values at start (`WebhookSecretBook.start`),
 * so a rotation, run wherever, ends them with the rest by what is stored alone: it never takes a
 * secret from the environment of the process that runs it, which may hold anything.
 * They are never logged.
 *
 * At rest they are encrypted (`sealed`, src/data-keys/seal.ts, bound to the secret's SHA-256 in
 * `digest`, which also tells two rows of one secret apart) once this process seals (the same gate
 * as trigger events', src/events/sealing.ts: not while a broker of the previous release, which
 * reads only `secret`, is connected). A broker's environment values are written encrypted at its
 * start when it encrypts already, and a rotation's new secret when the process that rotates has
 * the brokers' data key and they encrypt now (`sealedForStorage`). Otherwise they are written in
 * clear, as the previous release writes them, and a sealing process encrypts the rows in clear at
 * its next read of the table: at once after a rotation, which every process is told of, and
 * within 30 s otherwise.
 */

/** What a process needs to encrypt the secrets: its data keys, and whether it encrypts now. */
export interface SecretSealing {
  readonly keys: DataKeys;
  sealing(): boolean;
}

interface SecretState {
  /** Stored secrets and when each stops being accepted (null: not until the next rotation). */
  readonly stored: ReadonlyMap<string, Date | null>;
  /** A rotation is under way at Composio until then: its new secret is not known yet. */
  readonly pendingUntil: Date | null;
  /** Equal keys, equal states. */
  readonly key: string;
}

interface SecretRow {
  readonly id: number;
  readonly secret: string | null;
  readonly sealed: Buffer | null;
  readonly digest: string | null;
  readonly expiresAt: Date | null;
}

/** A row as read, with the secret it holds: in clear, or opened; null for a marker or one that does not open. */
type ReadRow = SecretRow & { readonly opened: string | null };

/**
 * The accepted secrets as stored: a row in clear or sealed holds one; a row with neither is a
 * rotation under way until its `expires_at`. A sealed secret that does not open (a key not given,
 * or not sealed for its row) is left out and said.
 */
async function readSecrets(db: Db, keys: DataKeys | undefined, log: SecretsLog): Promise<{ state: SecretState; rows: ReadRow[] }> {
  const stored: SecretRow[] = await db
    .select({
      id: webhookSecrets.id,
      secret: webhookSecrets.secret,
      sealed: webhookSecrets.sealed,
      digest: webhookSecrets.digest,
      expiresAt: webhookSecrets.expiresAt,
    })
    .from(webhookSecrets);
  const rows = stored.map((row) => ({ ...row, opened: row.secret ?? (row.sealed ? openedSecret(row, keys, log) : null) }));
  const accepted = new Map<string, Date | null>();
  let pendingUntil: Date | null = null;
  for (const row of rows) {
    if (row.opened !== null) accepted.set(row.opened, row.expiresAt);
    else if (row.sealed === null && row.expiresAt !== null && (pendingUntil === null || row.expiresAt > pendingUntil)) {
      pendingUntil = row.expiresAt;
    }
  }
  const key = JSON.stringify([
    [...accepted].map(([secret, at]) => [secret, at?.getTime() ?? null]).sort(),
    pendingUntil?.getTime() ?? null,
  ]);
  return { state: { stored: accepted, pendingUntil, key }, rows };
}

type SecretsLog = { warn(details: object, message: string): void };

/** For reads whose unopened secrets are counted or acted on by the caller, not said. */
const QUIET: SecretsLog = { warn: () => {} };

/**
 * Every row as it stands, in the order stored, sealed secrets opened with `keys` (null when one
 * does not open, or for a rotation's marker): for an operator's look, and the tests.
 */
export async function storedSecrets(
  db: Db,
  keys: DataKeys,
): Promise<Array<{ secret: string | null; expiresAt: Date | null; sealed: boolean }>> {
  const { rows } = await readSecrets(db, keys, QUIET);
  return [...rows]
    .sort((a, b) => a.id - b.id)
    .map((row) => ({
      secret: row.opened,
      expiresAt: row.expiresAt,
      sealed: row.sealed !== null,
    }));
}

/** A secret's SHA-256, hex: its `digest`. */
function digestOf(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

/** The additional data a sealed secret is bound to: its digest. */
function secretBinding(digest: string): string {
  return `omb-webhook-secret/1\u0000${digest}`;
}

/** `secret` encrypted under the current data key, bound to its digest (`digestOf(secret)`). */
function sealSecret(keys: DataKeys, secret: string, digest: string): Buffer {
  return seal(keys, secret, secretBinding(digest));
}

function openedSecret(row: SecretRow, keys: DataKeys | undefined, log: SecretsLog): string | null {
  try {
    if (!keys || !row.digest) throw new SealError('no data keys to open it with');
    const secret = open(keys, row.sealed!, secretBinding(row.digest)).toString('utf8');
    if (digestOf(secret) !== row.digest) throw new SealError('does not match its digest');
    return secret;
  } catch (error) {
    if (!(error instanceof SealError)) throw error;
    log.warn({ secretRow: row.id, reason: error.message }, 'a stored webhook secret does not decrypt: it is not accepted');
    return null;
  }
}

/**
 * Encrypts the rows held in clear (`rows`, as just read; see `sealClearSecret`); how many it did.
 */
async function sealClearSecrets(sql: Sql, keys: DataKeys, rows: readonly SecretRow[]): Promise<number> {
  let sealed = 0;
  for (const row of rows) if (row.secret !== null && (await sealClearSecret(sql, keys, row.id, row.secret))) sealed++;
  return sealed;
}

/**
 * Encrypts the row `id` holding `secret` in clear, only if it still holds it (another process may
 * be at the same); whether it did. A secret already sealed in another row (its environment value
 * stored again by a broker of the previous release) loses its clear row instead.
 */
async function sealClearSecret(sql: Sql, keys: DataKeys, id: number, secret: string): Promise<boolean> {
  const digest = digestOf(secret);
  const value = sealSecret(keys, secret, digest);
  const cleared = await sql`
    with twin as (select 1 from webhook_secrets where digest = ${digest}),
         cleared as (
           update webhook_secrets set sealed = ${value}, digest = ${digest}, secret = null
            where id = ${id} and secret = ${secret} and not exists (select 1 from twin)
           returning id),
         dropped as (
           delete from webhook_secrets
            where id = ${id} and secret = ${secret} and exists (select 1 from twin)
           returning id)
    select id from cleared`;
  return cleared.length > 0;
}

/** The NOTIFY channel announcing that the accepted webhook signing secrets changed (a rotation): every process reads them again. */
export const WEBHOOK_SECRETS_CHANNEL = 'omb_webhook_secrets';

/** How long a delivery that does not verify while a rotation is under way waits for its secret. */
const PENDING_WAIT_MS = 10_000;
/** Besides the notifications: a re-read this often, in case one was missed. */
const REFRESH_INTERVAL_MS = 30_000;

/**
 * One process's view of the accepted secrets. Re-read on every `omb_webhook_secrets`
 * notification, every 30 s, and when a delivery does not verify (one read for all the deliveries
 * that fail while it is under way). Expiry needs no re-read: it is compared with the clock on
 * every check.
 */
export class WebhookSecretBook {
  private state: SecretState = { stored: new Map(), pendingUntil: null, key: '' };
  /** What `accepted` answered last, for which state and from when until the next expiry. */
  private acceptedList: { state: SecretState; from: number; until: number; secrets: readonly string[] } | undefined;
  private loading: Promise<void> | undefined;
  private next: Promise<void> | undefined;
  private waiters = new Set<() => void>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly db: Db,
    private readonly environment: readonly string[],
    private readonly log: SecretsLog,
    /** Encrypts the secrets at rest while it says so (see the module's comment); none: kept as stored. */
    private readonly sealing?: SecretSealing,
  ) {}

  /** Stores this broker's environment secrets (see `storeEnvironmentSecrets`), reads the table once, then keeps it fresh. */
  async start(): Promise<void> {
    try {
      await storeEnvironmentSecrets(this.db, this.environment, this.sealing);
    } catch (err) {
      // The values still count in this process; only a rotation could not end them.
      this.log.warn({ err }, 'could not store the configured webhook secrets; a rotation will not end them');
    }
    await this.reload();
    this.timer = setInterval(() => void this.reload().catch(() => undefined), REFRESH_INTERVAL_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    for (const wake of this.waiters) wake();
    this.waiters.clear();
  }

  /** Every secret accepted at `now`. */
  accepted(now: Date): readonly string[] {
    const at = now.getTime();
    const known = this.acceptedList;
    // The same list until the table is read again or one of its secrets expires: each delivery checks it.
    if (known && known.state === this.state && at >= known.from && at < known.until) return known.secrets;
    const { stored } = this.state;
    const live = (expiresAt: Date | null | undefined) => expiresAt === null || expiresAt === undefined || expiresAt > now;
    const fromEnvironment = this.environment.filter((secret) => live(stored.get(secret)));
    const fromTable = [...stored].filter(([secret, expiresAt]) => live(expiresAt) && !this.environment.includes(secret)).map(([s]) => s);
    const expiries = [...stored.values()].flatMap((expiresAt) => (expiresAt && expiresAt > now ? [expiresAt.getTime()] : []));
    const secrets = [...fromEnvironment, ...fromTable];
    this.acceptedList = { state: this.state, from: at, until: Math.min(Number.POSITIVE_INFINITY, ...expiries), secrets };
    return secrets;
  }

  /**
   * Re-reads the table. Callers during a read share the next one, which starts after it: a read
   * already under way may have begun before the change they were told about.
   */
  reload(): Promise<void> {
    if (this.loading) {
      this.next ??= this.loading.then(() => {
        this.next = undefined;
        return this.reload();
      });
      return this.next;
    }
    this.loading = readSecrets(this.db, this.sealing?.keys, this.log)
      .then(
        async ({ state, rows }) => {
          if (this.sealing?.sealing() && rows.some((row) => row.secret !== null)) {
            await sealClearSecrets(this.db.$client, this.sealing.keys, rows).catch((err: unknown) =>
              this.log.warn({ err }, 'could not encrypt the webhook secrets stored in clear; trying again at the next read'),
            );
          }
          const changed = state.key !== this.state.key;
          this.state = state;
          if (!changed) return;
          const waiters = [...this.waiters];
          this.waiters.clear();
          for (const wake of waiters) wake();
        },
        (err: unknown) => {
          this.log.warn({ err }, 'could not read the accepted webhook secrets; keeping the ones known');
        },
      )
      .finally(() => {
        this.loading = undefined;
      });
    return this.loading;
  }

  /**
   * For a delivery that did not verify: checks it again (`check`) each time the accepted
   * secrets change. First waits for a read of the table begun after it failed, which every
   * delivery failing meanwhile shares: a read begun earlier may predate a rotation's marker whose
   * notification has not arrived yet. While a rotation is under way at Composio, keeps waiting
   * for its new secret (up to 10 s).
   */
  async recheck<V extends { ok: boolean }>(first: V, check: (secrets: readonly string[]) => V, now: () => Date): Promise<V> {
    const deadline = Date.now() + PENDING_WAIT_MS;
    let seen = this.state.key;
    await this.reload();
    let verdict = first;
    for (;;) {
      if (this.state.key !== seen) {
        seen = this.state.key;
        verdict = check(this.accepted(now()));
        if (verdict.ok) return verdict;
      }
      const { pendingUntil } = this.state;
      const waitMs = Math.min(deadline - Date.now(), (pendingUntil?.getTime() ?? 0) - now().getTime());
      if (waitMs <= 0) return verdict;
      await this.changeOrTimeout(waitMs);
    }
  }

  private changeOrTimeout(waitMs: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        clearInterval(poll);
        this.waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, waitMs);
      // The notification is the fast path; reading again now and then covers a lost one.
      const poll = setInterval(() => void this.reload(), 1000);
      this.waiters.add(done);
    });
  }
}

/**
 * Records a broker's `COMPOSIO_WEBHOOK_SECRET` values as accepted, until the next rotation: the
 * secrets a broker accepts are then all in the table, where a rotation gives them an end. A value
 * already stored keeps its row, so one that a rotation expired stays refused although still
 * configured. Only a serving broker calls this, with the values it accepts anyway.
 */
async function storeEnvironmentSecrets(db: Db, secrets: readonly string[], sealing: SecretSealing | undefined): Promise<void> {
  // Encrypted from the first when this process encrypts already (its events runtime looked for the
  // previous release before the intake starts); otherwise in clear, and encrypted at a later read.
  const keys = sealing?.sealing() ? sealing.keys : undefined;
  for (const secret of secrets) {
    const digest = digestOf(secret);
    // Stored already, in clear or sealed (by its digest): its row, and its expiry, stay.
    if (keys) {
      const sealed = sealSecret(keys, secret, digest);
      await db.execute(sql`
        insert into ${webhookSecrets} (sealed, digest, expires_at)
        select ${sealed}, ${digest}, null
         where not exists (select 1 from ${webhookSecrets} where ${webhookSecrets.digest} = ${digest} or ${webhookSecrets.secret} = ${secret})
        on conflict (digest) do nothing`);
    } else {
      await db.execute(sql`
        insert into ${webhookSecrets} (secret, expires_at)
        select ${secret}, null where not exists (select 1 from ${webhookSecrets} where ${webhookSecrets.digest} = ${digest})
        on conflict (secret) do nothing`);
    }
  }
}

export interface RotationDeps {
  readonly db: Db;
  readonly composio: Pick<ComposioGateway, 'setWebhookSubscription' | 'rotateWebhookSecret'>;
  /** The data keys of the process that rotates, when it has them: the new secret is then stored encrypted, if it may be (see `sealedForStorage`). */
  readonly keys?: DataKeys;
}

export interface RotationRequest {
  /** Where the project's subscription delivers (`PUBLIC_URL/v1/webhooks/composio`). */
  readonly webhookUrl: string;
  /** How long the secrets accepted until now stay accepted beside the new one. */
  readonly keepOldForMs: number;
  readonly now: Date;
}

export interface Rotation {
  readonly subscriptionId: string;
  /** The new signing secret (already stored as accepted). */
  readonly secret: string;
  /** When the secrets accepted before stop being accepted. */
  readonly oldExpireAt: Date;
  /** Whether it was stored encrypted from the first (else in clear, until the brokers encrypt it). */
  readonly storedEncrypted: boolean;
}

/** How long brokers hold a delivery they cannot verify while Composio is asked for a new secret. */
const PENDING_FOR_MS = 60_000;

/**
 * Rotates the project's webhook signing secret without refusing a delivery, on every broker
 * process at once (each follows the `omb_webhook_secrets` notification):
 *
 * 1. the brokers are told a rotation is under way (a row without a secret), before Composio is
 *    asked: Composio makes the new secret, so it cannot be stored sooner, and a delivery signed
 *    with it that arrives before step 3 is held until it can be checked instead of refused;
 * 2. Composio rotates the subscription's secret;
 * 3. the new secret is stored as accepted, and every stored secret accepted until now (the
 *    brokers' environment values among them, stored at their start) expires `keepOldForMs`
 *    later, by itself. Nothing else is added: the secret Composio answered is the only new one.
 *
 * If Composio refuses, the marker is removed and nothing changed. Who rotated is not known
 * here: the operators' action that calls this (`rotateSecret`) records the rotation once it
 * has happened.
 */
export async function rotateWebhookSecret(deps: RotationDeps, request: RotationRequest): Promise<Rotation> {
  const { db, composio } = deps;
  const { now } = request;
  const subscription = await composio.setWebhookSubscription(request.webhookUrl);

  const pendingUntil = new Date(now.getTime() + PENDING_FOR_MS);
  const [marker] = await db.transaction(async (tx) => {
    const rows = await tx.insert(webhookSecrets).values({ secret: null, expiresAt: pendingUntil }).returning({ id: webhookSecrets.id });
    await tx.execute(sql`select pg_notify(${WEBHOOK_SECRETS_CHANNEL}, 'rotating')`);
    return rows;
  });

  let secret: string;
  try {
    ({ secret } = await composio.rotateWebhookSecret(subscription.id));
  } catch (error) {
    await db.transaction(async (tx) => {
      await tx.delete(webhookSecrets).where(eq(webhookSecrets.id, marker!.id));
      await tx.execute(sql`select pg_notify(${WEBHOOK_SECRETS_CHANNEL}, 'rotation failed')`);
    });
    throw error;
  }

  const oldExpireAt = new Date(now.getTime() + request.keepOldForMs);
  const digest = digestOf(secret);
  const sealed = await sealedForStorage(db.$client, deps.keys, secret, digest);
  await db.transaction(async (tx) => {
    // Every accepted secret expires at the end of the overlap, unless it expires sooner.
    // (A secret's rows in clear or sealed; a sealed one is told by its digest.)
    await tx.execute(sql`
      update ${webhookSecrets} set expires_at = ${oldExpireAt.toISOString()}::timestamptz
       where (secret is not null or sealed is not null)
         and coalesce(digest, encode(sha256(convert_to(secret, 'UTF8')), 'hex')) <> ${digest}
         and (expires_at is null or expires_at > ${oldExpireAt.toISOString()}::timestamptz)`);
    await tx.execute(sql`delete from ${webhookSecrets} where secret = ${secret} or digest = ${digest}`);
    await tx
      .update(webhookSecrets)
      .set(sealed ? { secret: null, sealed, digest, expiresAt: null } : { secret, expiresAt: null })
      .where(eq(webhookSecrets.id, marker!.id));
    // Markers of rotations that never finished are no use any more.
    await tx.execute(sql`delete from ${webhookSecrets} where secret is null and sealed is null`);
    await tx.execute(sql`select pg_notify(${WEBHOOK_SECRETS_CHANNEL}, 'rotated')`);
  });
  return { subscriptionId: subscription.id, secret, oldExpireAt, storedEncrypted: sealed !== undefined };
}

/**
 * A rotation's new secret encrypted under `keys`' current key, for storing it so: only when the
 * brokers encrypt under that very key now, which a secret they encrypted under it, opened here,
 * shows (a key of the same id but other bytes, mistyped, opens none), and when no broker of the
 * previous release is connected (it reads only clear secrets). Otherwise undefined: the secret is
 * stored in clear, and the brokers encrypt it with their own key at their next read. Stored
 * encrypted from the first, it is never written to the database's files in clear.
 */
async function sealedForStorage(sql: Sql, keys: DataKeys | undefined, secret: string, digest: string): Promise<Buffer | undefined> {
  if (!keys) return undefined;
  const [probe] = await sql<{ id: number; sealed: Buffer; digest: string }[]>`
    select id::int as id, sealed, digest from webhook_secrets
     where sealed is not null and ${sealedKeyIdSql(sql, 'sealed')} = ${keys.current.id}
     limit 1`;
  if (!probe || openedSecret({ ...probe, secret: null, expiresAt: null }, keys, QUIET) === null) return undefined;
  if (await previousReleaseConnected(sql)) return undefined;
  return sealSecret(keys, secret, digest);
}

/**
 * For a rotation of the data keys (src/events/rotation.ts): every stored secret sealed under the
 * current key, those under another key opened and sealed again, those in clear sealed when
 * `sealClear` (no broker of the previous release connected). Each row written only if unchanged.
 */
export async function resealSecrets(
  sql: Sql,
  keys: DataKeys,
  sealClear: boolean,
): Promise<{ resealed: number; sealedFromClear: number; unreadable: number }> {
  const rows = await sql<{ id: number; secret: string | null; sealed: Buffer | null; digest: string | null }[]>`
    select id::int as id, secret, sealed, digest from webhook_secrets
     where secret is not null
        or ${sealedKeyIdSql(sql, 'sealed')} <> ${keys.current.id}`;
  const done = { resealed: 0, sealedFromClear: 0, unreadable: 0 };
  for (const row of rows) {
    const secret = row.secret ?? openedSecret({ ...row, expiresAt: null }, keys, QUIET);
    if (secret === null) {
      done.unreadable++;
      continue;
    }
    if (row.secret !== null) {
      if (sealClear && (await sealClearSecret(sql, keys, row.id, row.secret))) done.sealedFromClear++;
      continue;
    }
    const value = sealSecret(keys, secret, row.digest!);
    const written = await sql`update webhook_secrets set sealed = ${value} where id = ${row.id} and sealed = ${row.sealed}`;
    if (written.count > 0) done.resealed++;
  }
  return done;
}
