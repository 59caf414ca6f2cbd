import type { Logger } from 'pino';
import type { ComposioGateway, ConnectedAccount } from '../composio/index.js';
import { isOwnLabel, sameAlias } from '../connectors/patterns.js';
import type { Db, Sql } from '../db/database.js';
import { composioUserIdFor } from '../installations/tokens.js';
import { type RepeatingJob, startRepeatingJob } from '../repeating-job.js';
import { moveTriggerToAccount } from './reconnect.js';
import { accountLabel, noteReconnectAsked, setTriggerAccountAlias, triggersNeedingReconnect } from './store.js';
import type { TriggerRow } from './view.js';

/**
 * Triggers come back after a reconnect by themselves. When a trigger's account expired
 * (`needs_reconnect`) and the person connects the app again under the same label (the reconnect
 * flow deletes the stopped account and links a new one under its label), the trigger moves to
 * the new account as soon as it is `ACTIVE`: same id, automation, filter, config, on/off state
 * and counters, with a Composio trigger made anew on the new account. A trigger whose label
 * never comes back stays `needs_reconnect`.
 */

/** Any fixed number: the lock that lets one broker process at a time run the job. */
const RECONNECT_LOCK = 7_262_011_004;
/** Triggers looked at per run, oldest loss first. */
const BATCH = 500;
/**
 * Triggers stranded longer than this, with no sign-in link asked under their label for as
 * long, are looked at on every `RARE_EVERY`-th run only.
 */
const RECENT_MS = 24 * 3_600_000;
const RARE_EVERY = 20;

export interface ReconnectDeps {
  readonly db: Db;
  readonly sql: Sql;
  /** Where the run's session advisory lock is held: Postgres itself (`Database.sessions`); `sql` when not given. */
  readonly sessions?: Sql;
  readonly composio: ComposioGateway;
  readonly log: Pick<Logger, 'info' | 'warn'>;
}

export interface ReconnectRun {
  /** False when another process held the lock and this run did nothing. */
  readonly ran: boolean;
  /** Triggers moved to a reconnected account. */
  readonly moved: number;
}

/**
 * One pass over the triggers that need a reconnect, in one process at a time (a session
 * advisory lock on a connection held for the run). `includeOld`: also triggers stranded for
 * more than a day, which are looked at less often to spare the Composio budget.
 */
export async function reattachReconnectedTriggers(
  deps: ReconnectDeps,
  options: { now: Date; includeOld?: boolean },
): Promise<ReconnectRun> {
  const connection = await (deps.sessions ?? deps.sql).reserve();
  try {
    const [lock] = await connection<{ locked: boolean }[]>`select pg_try_advisory_lock(${RECONNECT_LOCK}) as locked`;
    if (!lock?.locked) return { ran: false, moved: 0 };
    try {
      return { ran: true, moved: await reattach(deps, options.now, options.includeOld ?? true) };
    } finally {
      await connection`select pg_advisory_unlock(${RECONNECT_LOCK})`;
    }
  } finally {
    connection.release();
  }
}

async function reattach(deps: ReconnectDeps, now: Date, includeOld: boolean): Promise<number> {
  const recent = (row: TriggerRow) =>
    [row.needsReconnectAt, row.reconnectAskedAt].some((at) => at !== null && now.getTime() - at.getTime() < RECENT_MS);
  const stranded = (await triggersNeedingReconnect(deps.db, BATCH)).filter((row) => includeOld || recent(row));
  // One look at the installation's accounts of an app serves all its triggers of that app.
  const groups = new Map<string, TriggerRow[]>();
  for (const row of stranded) {
    const key = `${row.installationId} ${row.toolkit}`;
    groups.set(key, [...(groups.get(key) ?? []), row]);
  }
  let moved = 0;
  for (const rows of groups.values()) {
    try {
      moved += await reattachGroup(deps, rows);
    } catch (err) {
      // Composio down or refusing: the next run tries again.
      deps.log.warn(
        { err, installationId: rows[0]!.installationId, toolkit: rows[0]!.toolkit },
        'could not bring triggers back after a reconnect',
      );
    }
  }
  return moved;
}

async function reattachGroup(deps: ReconnectDeps, rows: TriggerRow[]): Promise<number> {
  const { installationId, toolkit } = rows[0]!;
  const owner = { id: installationId, composioUserId: composioUserIdFor(installationId) };
  const labelled: Array<{ row: TriggerRow; alias: string }> = [];
  for (const row of rows) {
    const alias = row.accountAlias ?? (await learnAlias(deps, owner.composioUserId, row));
    if (alias !== null) labelled.push({ row, alias });
  }
  if (labelled.length === 0) return 0;

  const page = await deps.composio.listConnectedAccounts({
    userId: owner.composioUserId,
    toolkitSlugs: [toolkit],
    statuses: ['ACTIVE'],
    limit: 50,
  });
  // Listed for the installation's own user: the filter is the proof the accounts are its.
  const active = page.items.filter((a: ConnectedAccount) => a.toolkit.toLowerCase() === toolkit && a.status === 'ACTIVE');
  let moved = 0;
  for (const { row, alias } of labelled) {
    const account = accountUnder(active, alias);
    if (!account) continue;
    const outcome = await moveTriggerToAccount({ db: deps.db, composio: deps.composio, log: deps.log }, owner, row, account);
    if (outcome.moved) moved += 1;
    else deps.log.warn({ installationId, triggerId: row.id, reason: outcome.reason }, 'trigger not moved to the reconnected account');
  }
  return moved;
}

/**
 * The working account a trigger comes back to: the one under its label; for a trigger whose
 * account had no label of the person's own, the app's one working account without one (none or
 * several: it waits, as picking one could move it to the wrong mailbox).
 */
function accountUnder(active: readonly ConnectedAccount[], label: string): ConnectedAccount | undefined {
  if (label !== '') return active.find((a) => sameAlias(a.alias, label));
  const unlabelled = active.filter((a) => !isOwnLabel(a.alias));
  return unlabelled.length === 1 ? unlabelled[0] : undefined;
}

/**
 * For triggers made before labels were recorded: the expired account still exists until the
 * person reconnects, so its label can be read from Composio once and kept.
 */
async function learnAlias(deps: ReconnectDeps, composioUserId: string, row: TriggerRow): Promise<string | null> {
  const account = await deps.composio.findConnectedAccount(composioUserId, row.connectedAccountId);
  if (!account) return null;
  const label = accountLabel(account.alias);
  await setTriggerAccountAlias(deps.db, row.installationId, row.id, label);
  return label;
}

/**
 * Runs `reattachReconnectedTriggers` `intervalMs` after start and again `intervalMs` after each
 * run ends (triggers stranded for more than a day, with no sign-in link asked under their label
 * within a day, on every 20th run), so runs never overlap; failures are logged and retried on the
 * next run.
 */
export function startReconnectJob(deps: ReconnectDeps & { clock: { now(): Date }; intervalMs: number }): RepeatingJob {
  let runs = 0;
  const run = async () => {
    const includeOld = runs++ % RARE_EVERY === 0;
    try {
      await reattachReconnectedTriggers(deps, { now: deps.clock.now(), includeOld });
    } catch (err) {
      deps.log.warn({ err }, 'trigger reconnect run failed');
    }
  };
  return startRepeatingJob(run, { intervalMs: deps.intervalMs, firstDelayMs: deps.intervalMs });
}

/**
 * For the connected-app routes: a sign-in link under `alias` was made, so the installation's
 * triggers of that app waiting under that label are looked at on every run for a day.
 */
export function signInLinkNoter(db: Db, clock: { now(): Date }) {
  return (installationId: string, toolkit: string, alias: string) => noteReconnectAsked(db, installationId, toolkit, alias, clock.now());
}
