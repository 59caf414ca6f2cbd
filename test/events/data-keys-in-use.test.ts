import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBroker } from '../support/broker-process.js';
import { TEST_DATA_KEYS } from '../support/data-keys.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { BROKER_ENV } from './helpers.js';

/**
 * A broker records its data key in use before it seals anything under it, and a broker whose keys
 * leave out a key in use refuses to start, naming it and changing nothing: it would otherwise
 * serve without the events it cannot read, or seal new ones under a key the others do not have.
 */

let database: TestDatabase;
beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(async () => {
  await database?.drop();
});

const keyIdsInUse = async () =>
  (await database.sql<{ key_id: string }[]>`select key_id from data_keys_in_use order by key_id`).map((row) => row.key_id);

describe('data keys in use', () => {
  it('are recorded by a broker that encrypts, and refuse a broker started without one of them', async () => {
    const env = { ...BROKER_ENV, DATABASE_URL: database.url };
    const broker = await startBroker(env);
    try {
      expect(await keyIdsInUse()).toEqual(['test']);
    } finally {
      expect(await broker.stop()).toBe(0);
    }

    // Another process with a key of its own (as a second key file would give it).
    const other = `other:${Buffer.alloc(32, 3).toString('base64')}`;
    const refused = await startBroker({ ...env, DATA_ENCRYPTION_KEYS: other }).then(
      () => undefined,
      (error: Error) => error.message,
    );
    expect(refused).toMatch(/^broker exited with 78 before listening/);
    expect(refused).toContain('the key id(s) test, which are not configured');
    expect(await keyIdsInUse(), 'nothing changed').toEqual(['test']);

    // With the key in use after its own, it starts, and records its own (it encrypts with it).
    const both = await startBroker({ ...env, DATA_ENCRYPTION_KEYS: `${other},${TEST_DATA_KEYS}` });
    try {
      expect(await keyIdsInUse()).toEqual(['other', 'test']);
    } finally {
      expect(await both.stop()).toBe(0);
    }
  }, 60_000);
});
