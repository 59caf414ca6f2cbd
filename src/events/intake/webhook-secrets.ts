import { and, eq, gt, isNotNull, isNull, ne, or, sql } from 'drizzle-orm';
import type { ComposioGateway } from '../../composio/types.js';
import type { Db } from '../../db/database.js';
import { webhookSecrets } from '../../db/schema.js';

/**
 * The webhook signing secrets every broker process accepts, and their rotation. The only module
 * that writes `webhook_secrets`.
 *
 * Accepted: every `COMPOSIO_WEBHOOK_SECRET` value, and every stored secret that has not expired;
 * a stored secret past its `expires_at` is refused, even when it is still in the environment.
 * Each broker stores its own `COMPOSIO_WEBHOOK_SECRET` values at start (`WebhookSecretBook.start`),
 * so a rotation, run wherever, ends them with the rest by what is stored alone: it never takes a
 * secret from the environment of the process that runs it, which may hold anything.
 * Secrets are stored in clear, since the HMAC needs the secret itself; they are never logged.
 */

interface SecretState {
  /** Stored secrets and when each stops being accepted (null: not until the next rotation). */
  readonly stored: ReadonlyMap<string, Date | null>;
  /** A rotation is under way at Composio until then: its new secret is not known yet. */
  readonly pendingUntil: Date | null;
  /** Equal keys, equal states. */
  readonly key: string;
}

async function readSecrets(db: Db): Promise<SecretState> {
  const rows = await db.select({ secret: webhookSecrets.secret, expiresAt: webhookSecrets.expiresAt }).from(webhookSecrets);
  const stored = new Map<string, Date | null>();
  let pendingUntil: Date | null = null;
  for (const { secret, expiresAt } of rows) {
    if (secret !== null) stored.set(secret, expiresAt);
    else if (expiresAt !== null && (pendingUntil === null || expiresAt > pendingUntil)) pendingUntil = expiresAt;
  }
  const key = JSON.stringify([[...stored].map(([secret, at]) => [secret, at?.getTime() ?? null]).sort(), pendingUntil?.getTime() ?? null]);
  return { stored, pendingUntil, key };
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
  private loading: Promise<void> | undefined;
  private next: Promise<void> | undefined;
  private waiters = new Set<() => void>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly db: Db,
    private readonly environment: readonly string[],
    private readonly log: { warn(details: object, message: string): void },
  ) {}

  /** Stores this broker's environment secrets (see `storeEnvironmentSecrets`), reads the table once, then keeps it fresh. */
  async start(): Promise<void> {
    try {
      await storeEnvironmentSecrets(this.db, this.environment);
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
  accepted(now: Date): string[] {
    const { stored } = this.state;
    const live = (expiresAt: Date | null | undefined) => expiresAt === null || expiresAt === undefined || expiresAt > now;
    const fromEnvironment = this.environment.filter((secret) => live(stored.get(secret)));
    const fromTable = [...stored].filter(([secret, expiresAt]) => live(expiresAt) && !this.environment.includes(secret)).map(([s]) => s);
    return [...fromEnvironment, ...fromTable];
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
    this.loading = readSecrets(this.db)
      .then(
        (state) => {
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
  async recheck<V extends { ok: boolean }>(first: V, check: (secrets: string[]) => V, now: () => Date): Promise<V> {
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
async function storeEnvironmentSecrets(db: Db, secrets: readonly string[]): Promise<void> {
  if (secrets.length === 0) return;
  await db
    .insert(webhookSecrets)
    .values(secrets.map((secret) => ({ secret, expiresAt: null })))
    .onConflictDoNothing({ target: webhookSecrets.secret });
}

export interface RotationDeps {
  readonly db: Db;
  readonly composio: Pick<ComposioGateway, 'setWebhookSubscription' | 'rotateWebhookSecret'>;
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
  await db.transaction(async (tx) => {
    // Every accepted secret expires at the end of the overlap, unless it expires sooner.
    await tx
      .update(webhookSecrets)
      .set({ expiresAt: oldExpireAt })
      .where(
        and(
          isNotNull(webhookSecrets.secret),
          ne(webhookSecrets.secret, secret),
          or(isNull(webhookSecrets.expiresAt), gt(webhookSecrets.expiresAt, oldExpireAt)),
        ),
      );
    await tx.delete(webhookSecrets).where(eq(webhookSecrets.secret, secret));
    await tx.update(webhookSecrets).set({ secret, expiresAt: null }).where(eq(webhookSecrets.id, marker!.id));
    // Markers of rotations that never finished are no use any more.
    await tx.delete(webhookSecrets).where(isNull(webhookSecrets.secret));
    await tx.execute(sql`select pg_notify(${WEBHOOK_SECRETS_CHANNEL}, 'rotated')`);
  });
  return { subscriptionId: subscription.id, secret, oldExpireAt };
}
