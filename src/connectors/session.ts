import type { ComposioGateway } from '../composio/index.js';
import { ComposioFailure, isComposioNotFound } from '../composio/index.js';
import type { Db } from '../db/database.js';
import { AppError } from '../errors.js';
import type { Installation } from '../installations/installations.js';
import { replaceStoredSession, storedSession, storeSessionMcpUrl } from '../installations/store.js';

/** The installation's Tool Router Session as the broker keeps it. */
export interface StoredSession {
  readonly sessionId: string;
  readonly mcpUrl: string;
}

/**
 * The installation's Session, created on first need and then reused from the database: no
 * Composio call while it is known. A Session moved over from the first version (no MCP URL
 * stored yet) is looked at once and replaced if it lacks multi-account mode.
 */
async function ensureSession(
  db: Db,
  composio: ComposioGateway,
  installation: Pick<Installation, 'id' | 'composioUserId'>,
): Promise<StoredSession> {
  const row = await storedSession(db, installation.id);
  if (row?.sessionId && row.mcpUrl) return { sessionId: row.sessionId, mcpUrl: row.mcpUrl };
  if (row?.sessionId) {
    const existing = await composio.getSession(row.sessionId).catch((error: unknown) => {
      if (isComposioNotFound(error)) return null;
      throw error;
    });
    if (existing?.multiAccountEnabled) return store(db, installation.id, row.sessionId, existing);
    return replaceSession(db, composio, installation, row.sessionId);
  }
  return replaceSession(db, composio, installation, null);
}

/**
 * Makes a new multi-account Session for the same Composio user (so every connected account
 * stays) and stores it in place of `previous`. When two requests race, the first stored wins
 * and the other uses it.
 */
async function replaceSession(
  db: Db,
  composio: ComposioGateway,
  installation: Pick<Installation, 'id' | 'composioUserId'>,
  previous: string | null,
): Promise<StoredSession> {
  let created = await composio.createSession(installation.composioUserId);
  if (!created.multiAccountEnabled) created = await composio.createSession(installation.composioUserId);
  if (!created.multiAccountEnabled) {
    throw new ComposioFailure('unavailable', 'Composio made a Session without multi-account mode; try again shortly.');
  }
  const updated = await replaceStoredSession(db, installation.id, previous, created);
  if (updated?.sessionId && updated.mcpUrl) return { sessionId: updated.sessionId, mcpUrl: updated.mcpUrl };
  // Another request stored its Session first: use that one.
  const winner = await storedSession(db, installation.id);
  if (winner?.sessionId && winner.mcpUrl) return { sessionId: winner.sessionId, mcpUrl: winner.mcpUrl };
  throw new AppError(404, 'not_found', 'this installation no longer exists');
}

async function store(db: Db, installationId: string, sessionId: string, session: { mcpUrl: string }): Promise<StoredSession> {
  await storeSessionMcpUrl(db, installationId, session.mcpUrl);
  return { sessionId, mcpUrl: session.mcpUrl };
}

/**
 * Runs `work` with the installation's Session; if Composio no longer knows that Session
 * (404), makes a new one for the same user and runs `work` once more.
 */
export async function withSession<T>(
  db: Db,
  composio: ComposioGateway,
  installation: Pick<Installation, 'id' | 'composioUserId'>,
  work: (session: StoredSession) => Promise<T>,
): Promise<T> {
  const session = await ensureSession(db, composio, installation);
  try {
    return await work(session);
  } catch (error) {
    if (!isComposioNotFound(error)) throw error;
    const known = await composio.getSession(session.sessionId).then(
      () => true,
      (lookup: unknown) => {
        if (isComposioNotFound(lookup)) return false;
        throw lookup;
      },
    );
    if (known) throw error;
    return work(await replaceSession(db, composio, installation, session.sessionId));
  }
}
