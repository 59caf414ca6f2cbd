import { and, eq, sql } from 'drizzle-orm';
import type { Db } from '../db/database.js';
import { mcpSessions } from '../db/schema.js';

/**
 * The `mcp_sessions` table: which MCP session ids Composio gave each installation. Every read
 * and write is filtered by the installation.
 */

/** Ids kept per installation; a client holding an older one is told to start a new MCP session. */
export const MCP_SESSIONS_KEPT = 50;

export async function isGivenMcpSession(db: Db, installationId: string, mcpSessionId: string): Promise<boolean> {
  const [row] = await db
    .select({ id: mcpSessions.mcpSessionId })
    .from(mcpSessions)
    .where(and(eq(mcpSessions.installationId, installationId), eq(mcpSessions.mcpSessionId, mcpSessionId)));
  return row !== undefined;
}

/** Remembers an id Composio gave the installation, keeping its newest `MCP_SESSIONS_KEPT`. */
export async function rememberMcpSession(db: Db, installationId: string, mcpSessionId: string): Promise<void> {
  await db.insert(mcpSessions).values({ installationId, mcpSessionId }).onConflictDoNothing();
  await db.execute(sql`
    delete from ${mcpSessions}
    where ${mcpSessions.installationId} = ${installationId}
      and ${mcpSessions.mcpSessionId} not in (
        select ${mcpSessions.mcpSessionId} from ${mcpSessions}
        where ${mcpSessions.installationId} = ${installationId}
        order by ${mcpSessions.createdAt} desc
        limit ${MCP_SESSIONS_KEPT})`);
}

export async function forgetMcpSession(db: Db, installationId: string, mcpSessionId: string): Promise<void> {
  await db.delete(mcpSessions).where(and(eq(mcpSessions.installationId, installationId), eq(mcpSessions.mcpSessionId, mcpSessionId)));
}
