import { rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, startEmbeddedPostgres } from '../../src/db/embedded.js';
import { createLogger } from '../../src/logger.js';
import { initialisedFolder } from '../support/data-folder.js';

/**
 * The embedded Postgres's port: one found free may be taken by the time Postgres binds it (on a
 * busy machine, by any of the connections opened meanwhile), and another is tried; one asked for
 * is not, and the error says why Postgres stopped.
 */

let dataDir: string;
let held: Server;
let heldPort: number;

beforeAll(async () => {
  dataDir = await initialisedFolder('omb-pg-port-');
  held = createServer();
  await new Promise<void>((resolve) => held.listen(0, '127.0.0.1', resolve));
  heldPort = (held.address() as { port: number }).port;
});
afterAll(async () => {
  await new Promise((resolve) => held.close(resolve));
  await rm(dataDir, { recursive: true, force: true });
});

describe('the embedded Postgres’s port', () => {
  it('is found again when the one found free is taken before Postgres binds it', async () => {
    let logs = '';
    const logger = createLogger('info', { write: (line: string) => (logs += line) });
    const found: number[] = [];
    const findPort = async () => {
      const port = found.length === 0 ? heldPort : await freePort();
      found.push(port);
      return port;
    };
    const server = await startEmbeddedPostgres({ dataDir, logger, findPort });
    try {
      expect(found).toHaveLength(2);
      expect(server.url).toContain(`:${found[1]}/`);
      expect(logs).toContain('the port found for embedded Postgres was taken before it started; trying another');
    } finally {
      await server.stop();
    }
  }, 60_000);

  it('starts on a port whose socket lock, left in /tmp by a killed server of another user, it may not open', async () => {
    // Mode 000: no one but root may open it, and Postgres never runs as root. Postgres used to make its
    // socket and lock file there, and stopped: `could not open lock file "/tmp/.s.PGSQL.<port>.lock"`.
    const port = await freePort();
    const lock = `/tmp/.s.PGSQL.${port}.lock`;
    await writeFile(lock, `99999999\n${dataDir}\n`, { mode: 0o000 });
    try {
      const server = await startEmbeddedPostgres({ dataDir, logger: createLogger('silent'), port });
      try {
        expect(server.url).toContain(`:${port}/`);
        const sql = postgres(server.url, { max: 1 });
        expect((await sql`select current_setting('unix_socket_directories') as dirs`)[0]!.dirs).toBe('');
        await sql.end();
      } finally {
        await server.stop();
      }
    } finally {
      await rm(lock, { force: true });
    }
  }, 60_000);

  it('is not changed when it was asked for: the start fails with what Postgres said', async () => {
    const logger = createLogger('silent');
    await expect(startEmbeddedPostgres({ dataDir, logger, port: heldPort })).rejects.toThrow(
      /did not start: FATAL: could not create any TCP\/IP sockets \(see its log with LOG_LEVEL=debug\)$/,
    );
  }, 60_000);

  it('is given up on after three taken ones', async () => {
    const logger = createLogger('silent');
    let asked = 0;
    const findPort = async () => {
      asked += 1;
      return heldPort;
    };
    await expect(startEmbeddedPostgres({ dataDir, logger, findPort })).rejects.toThrow(/could not create any TCP\/IP sockets/);
    expect(asked).toBe(3);
  }, 60_000);
});
