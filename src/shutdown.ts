import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';

/*
 * How the broker's HTTP server stops, apart from the entry (main.ts), which runs on import: what
 * other code (and the tests of the shipped compose file) needs to know of it without starting it.
 */

/** After SHUTDOWN_GRACE_MS: time enough to close the pool (5 s at most) and stop the embedded Postgres. */
export const CLOSE_MARGIN_MS = 15_000;

/**
 * Stops the HTTP server within `graceMs`. Fastify answers the waiting polls and stops accepting
 * at once, but Node closes only the connections idle at that moment: a keep-alive connection
 * whose request finishes later would hold the close open until its keep-alive timeout. So idle
 * connections are closed as they appear, and whatever still runs at the deadline is cut off,
 * leaving time to close the database and the embedded Postgres properly.
 */
export async function closeServer(app: FastifyInstance, graceMs: number, logger: Logger): Promise<void> {
  const closeIdle = setInterval(() => app.server.closeIdleConnections(), 50);
  const deadline = setTimeout(() => {
    logger.warn({ graceMs }, 'requests still running at the end of SHUTDOWN_GRACE_MS; closing their connections');
    app.server.closeAllConnections();
  }, graceMs);
  try {
    await app.close();
  } finally {
    clearInterval(closeIdle);
    clearTimeout(deadline);
  }
}
