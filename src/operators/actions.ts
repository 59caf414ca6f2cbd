import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { Database } from '../db/database.js';
import { type Rotation, type RotationDeps, type RotationRequest, rotateWebhookSecret } from '../events/intake/webhook-secrets.js';
import { disableInstallation, enableInstallation, type InstallationSwitch } from '../installations/disable.js';
import { type RegistrationMode, registrationMode, setRegistrationMode } from '../installations/registration.js';
import { revokeGrant } from '../plans/store.js';
import { type Actor, recordAudit } from './audit.js';

/**
 * What an operator can change, whether through `/v1/admin/…` or the CLI: each action is one
 * function that makes the change, writes its audit row in the change's own transaction (a change
 * that did not commit leaves no row; a row that cannot be written undoes the change; a rotation
 * at Composio is the one exception, see `rotateSecret`) and sends what the change must tell the
 * broker processes. Routes and commands only say who acts.
 */

export interface ActionContext {
  readonly database: Database;
  readonly clock: Clock;
  /** Takes the one line per change that names the operator (never a token): the request's log for the API. */
  readonly log: Pick<Logger, 'info'>;
}

/** Disables the installation (see `disableInstallation`); disabling twice keeps the first time. */
export async function disable(ctx: ActionContext, actor: Actor, installationId: string): Promise<InstallationSwitch> {
  const now = ctx.clock.now();
  const { disabledAt } = await ctx.database.db.transaction(async (tx) => {
    const result = await disableInstallation(tx, installationId, now);
    const outcome = result.wasDisabled ? 'already disabled' : 'disabled';
    await recordAudit(tx, actor, { action: 'installation.disable', target: installationId, outcome }, now);
    return result;
  });
  ctx.log.info({ operator: actor.operator, action: 'disable', installationId }, 'operator action');
  return { installationId, disabledAt };
}

/** Lets the installation's existing token work again. */
export async function enable(ctx: ActionContext, actor: Actor, installationId: string): Promise<InstallationSwitch> {
  const now = ctx.clock.now();
  await ctx.database.db.transaction(async (tx) => {
    const { wasDisabled } = await enableInstallation(tx, installationId);
    const outcome = wasDisabled ? 'enabled' : 'already enabled';
    await recordAudit(tx, actor, { action: 'installation.enable', target: installationId, outcome }, now);
  });
  ctx.log.info({ operator: actor.operator, action: 'enable', installationId }, 'operator action');
  return { installationId, disabledAt: null };
}

/** Refuses the grant with this `jti` from now on; revoking twice answers the first time. */
export async function revoke(ctx: ActionContext, actor: Actor, jti: string): Promise<{ jti: string; revokedAt: string }> {
  const now = ctx.clock.now();
  const { revokedAt } = await ctx.database.db.transaction(async (tx) => {
    const result = await revokeGrant(tx, jti, now);
    const outcome = result.revokedNow ? 'revoked' : 'already revoked';
    await recordAudit(tx, actor, { action: 'grant.revoke', target: jti, outcome }, now);
    return result;
  });
  ctx.log.info({ operator: actor.operator, action: 'revoke grant', grantId: jti }, 'operator action');
  return { jti, revokedAt };
}

/**
 * Opens or closes registration for every broker process (they read the stored mode on each
 * registration). `configured` is `REGISTRATION_MODE`, the mode until an operator first sets one,
 * so that the record can say when nothing changed.
 */
export async function switchRegistration(
  ctx: ActionContext,
  actor: Actor,
  change: { mode: RegistrationMode; configured: RegistrationMode },
): Promise<{ mode: RegistrationMode }> {
  const { mode } = change;
  const now = ctx.clock.now();
  await ctx.database.db.transaction(async (tx) => {
    const before = await registrationMode(tx, change.configured);
    await setRegistrationMode(tx, mode);
    const outcome = before === mode ? `already ${mode}` : mode;
    await recordAudit(tx, actor, { action: 'registration.set', target: 'registration', outcome }, now);
  });
  ctx.log.info({ operator: actor.operator, action: 'registration', mode }, 'operator action');
  return { mode };
}

/** What a rotation needs besides the database: Composio, the URL and the overlap (never a secret of the caller's). */
export type SecretRotation = Omit<RotationDeps, 'db'> & Omit<RotationRequest, 'now'>;

/**
 * Gives the project's webhook subscription a new signing secret (see `rotateWebhookSecret`).
 * Unlike the other actions its record cannot share the change's transaction: the rotation
 * happens at Composio, which no rollback undoes, and the brokers must accept the new secret
 * whatever becomes of the record. So the row follows the rotation, and never holds the secret.
 * No `operator action` line either: the CLI, which rotates, prints its own summary.
 */
export async function rotateSecret(
  ctx: Pick<ActionContext, 'database' | 'clock'>,
  actor: Actor,
  rotation: SecretRotation,
): Promise<Rotation> {
  const { database, clock } = ctx;
  const rotated = await rotateWebhookSecret(
    { db: database.db, composio: rotation.composio, ...(rotation.keys ? { keys: rotation.keys } : {}) },
    { webhookUrl: rotation.webhookUrl, keepOldForMs: rotation.keepOldForMs, now: clock.now() },
  );
  await recordAudit(
    database.db,
    actor,
    { action: 'webhook.rotate-secret', target: rotated.subscriptionId, outcome: 'rotated' },
    clock.now(),
  );
  return rotated;
}
