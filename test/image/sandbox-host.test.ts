import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type Sandbox, startSandbox } from '../../src/sim/index.js';
import { silentLogger } from '../composio/harness.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { rawRequest } from '../support/http.js';

/**
 * docker/compose.sandbox.yml: the simulator listens on every address of the container
 * (SANDBOX_HOST=0.0.0.0) so its published port reaches it, and its links name loopback, which on
 * the host is where the published port is.
 */

let db: TestDatabase;
let sandbox: Sandbox | undefined;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});
afterEach(async () => {
  await sandbox?.close();
  sandbox = undefined;
  // Each test starts from a sandbox that has kept nothing yet.
  await db.sql`delete from sandbox.records`;
  await db.sql`delete from sandbox.project`;
});

describe('the sandbox simulator’s listening address', () => {
  it('listens on every address with SANDBOX_HOST=0.0.0.0 and names loopback in its links', async () => {
    sandbox = await startSandbox({
      logger: silentLogger,
      sql: db.sql,
      brokerWebhookUrl: 'http://127.0.0.1:9/v1/webhooks/composio',
      host: '0.0.0.0',
    });
    const origin = new URL(sandbox.baseUrl);
    expect(origin.hostname).toBe('127.0.0.1');
    // Reached on another address than loopback's 127.0.0.1, as a published port reaches it.
    const other = await rawRequest(`http://127.0.0.2:${origin.port}/_sim`);
    expect(other.status).toBe(200);
  });

  it('listens on loopback alone by default', async () => {
    sandbox = await startSandbox({ logger: silentLogger, sql: db.sql, brokerWebhookUrl: 'http://127.0.0.1:9/v1/webhooks/composio' });
    const origin = new URL(sandbox.baseUrl);
    expect((await rawRequest(`${sandbox.baseUrl}/_sim`)).status).toBe(200);
    await expect(rawRequest(`http://127.0.0.2:${origin.port}/_sim`)).rejects.toThrow(/ECONNREFUSED/);
  });
});
