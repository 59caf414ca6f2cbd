import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { ComposioGateway, ConnectedAccount } from '../composio/index.js';
import { ComposioFailure, isComposioNotFound } from '../composio/index.js';
import type { Db } from '../db/database.js';
import { badRequest, conflict } from '../errors.js';
import type { Installation } from '../installations/installations.js';
import { listAccounts } from './inventory.js';
import { isOwnLabel, RETRY_LABEL_PREFIX, sameAlias } from './patterns.js';
import { withSession } from './session.js';
import { isAbandonedSignIn } from './sign-ins.js';

/** At most this many usable accounts per app (Composio's multi-account cap we configure). */
const MAX_ACCOUNTS_PER_TOOLKIT = 5;

/** Accounts that work or may still start working; the others can be replaced under their label. */
const USABLE: ReadonlySet<string> = new Set(['ACTIVE', 'INITIATED', 'INITIALIZING', 'PENDING']);

/** An account counts as working when it is `ACTIVE` or Composio did not say. */
const isWorking = (account: ConnectedAccount) => account.status === 'ACTIVE' || !account.status;
/** A sign-in whose link expired unfinished can no longer start working, whatever its status says. */
const isUsable = (account: ConnectedAccount, now: Date) =>
  (!account.status || USABLE.has(account.status)) && !isAbandonedSignIn(account, now);

/**
 * Told of every sign-in link made, with its label (`''` for none or a retry label), so that
 * triggers waiting for a reconnect under that label are looked at closely. Triggers keep that
 * record, and sit above connected apps, so it is handed in.
 */
export type NoteSignInLink = (installationId: string, toolkit: string, alias: string) => Promise<void>;

export interface AuthorizeContext {
  readonly db: Db;
  readonly composio: ComposioGateway;
  readonly noteSignInLink: NoteSignInLink;
  /** Tells abandoned sign-ins (older than their link's ten minutes) from ones still under way. */
  readonly clock: Clock;
  /** The request's log: the link made, and a note that could not be written. */
  readonly log: Pick<Logger, 'info' | 'warn'>;
}

export interface AuthorizeResult {
  url: string;
  connectedAccountId: string;
  /** `null` for a first connection, which goes to Composio with no label. */
  alias: string | null;
  expiresAt: string | null;
}

/**
 * A sign-in link for one more account of an app, under the newer label rules:
 * - a label is needed only beside a working account; a first connection (no account of the app
 *   at all) goes to Composio with no label; while accounts exist but none works an unlabelled
 *   retry gets a unique `omb-retry-…` label;
 * - a label held only by accounts that don't work is freed (revoked and deleted) and reused;
 *   a label a working account holds is a conflict;
 * - at most five usable accounts, not counting the ones being replaced nor abandoned sign-ins
 *   (unfinished after their link's ten minutes), which are deleted when Composio would count
 *   them against its own cap.
 *
 * The link made is noted for the triggers waiting for a reconnect; a note that cannot be written
 * is logged and the link answered all the same.
 */
export async function authorize(
  ctx: AuthorizeContext,
  installation: Pick<Installation, 'id' | 'composioUserId'>,
  toolkit: string,
  requestedAlias: string | undefined,
): Promise<AuthorizeResult> {
  const { db, composio, log } = ctx;
  const now = ctx.clock.now();
  // Listed for the installation's Composio user only: that filter is what makes them its own.
  const accounts = (await listAccounts(composio, installation.composioUserId, [toolkit])).filter((a) => a.toolkit === toolkit);

  let alias: string | undefined = requestedAlias;
  let replaced: ConnectedAccount[] = [];
  if (alias === undefined) {
    if (accounts.some(isWorking)) {
      throw badRequest(`${toolkit} already has a working account; give the new one a label such as "work" or "personal"`, 'alias_required');
    }
    // A retry beside accounts that don't work gets a label of its own; a first connection none.
    if (accounts.length > 0) alias = `${RETRY_LABEL_PREFIX}${randomBytes(6).toString('hex')}`;
  } else {
    const holders = accounts.filter((a) => sameAlias(a.alias, alias!));
    if (holders.some(isWorking)) {
      throw conflict(`a working ${toolkit} account already has the label "${alias}"; choose another label`, 'alias_taken');
    }
    replaced = holders;
  }

  const usable = accounts.filter((a) => isUsable(a, now) && !replaced.includes(a));
  if (usable.length >= MAX_ACCOUNTS_PER_TOOLKIT) {
    throw conflict(
      `${toolkit} already has ${MAX_ACCOUNTS_PER_TOOLKIT} accounts; disconnect one before adding another`,
      'too_many_accounts',
    );
  }
  // Composio may still count abandoned sign-ins it left `INITIATED` against its own cap: when
  // they would fill it, they go (nothing to revoke: they never signed in).
  const abandoned = accounts.filter((a) => USABLE.has(a.status) && !isUsable(a, now) && !replaced.includes(a));
  const cleared = usable.length + abandoned.length >= MAX_ACCOUNTS_PER_TOOLKIT ? abandoned : [];

  for (const account of replaced) await composio.deleteConnectedAccount(account.id, { revoke: true });
  for (const account of cleared) await deleteIfThere(composio, account.id);

  const link = await withSession(db, composio, installation, (session) =>
    composio.createLink(session.sessionId, toolkit, alias === undefined ? {} : { alias }),
  );
  // The client refuses anything else; a link elsewhere would mean Composio was impersonated.
  if (!composio.isTrustedHost(link.url)) {
    throw new ComposioFailure('unavailable', 'Composio returned a sign-in link on an unexpected host; try again later.');
  }
  log.info({ toolkit, connectedAccountId: link.connectedAccountId }, 'sign-in link made');
  // Under its label, or none: triggers whose account had no label wait for an unlabelled one.
  await ctx.noteSignInLink(installation.id, toolkit, isOwnLabel(alias) ? alias : '').catch((err: unknown) => {
    log.warn({ err }, 'could not note the sign-in link for triggers waiting for a reconnect');
  });
  return { url: link.url, connectedAccountId: link.connectedAccountId, alias: alias ?? null, expiresAt: link.expiresAt };
}

/** Deletes an account that may have gone meanwhile (Composio cleaning up an abandoned sign-in). */
async function deleteIfThere(composio: ComposioGateway, id: string): Promise<void> {
  try {
    await composio.deleteConnectedAccount(id, { revoke: false });
  } catch (error) {
    if (!isComposioNotFound(error)) throw error;
  }
}
