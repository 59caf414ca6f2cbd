import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rotateWebhookSecret, storedSecrets, WebhookSecretBook } from '../../../src/events/intake/webhook-secrets.js';
import { createEventsRuntime, type EventsRuntime } from '../../../src/events/runtime.js';
import { createLogger } from '../../../src/logger.js';
import { dataKeys, testDataKeys } from '../../support/data-keys.js';
import { createTestDatabase, type TestDatabase } from '../../support/database.js';
import { until } from '../../support/http.js';

/**
 * Each broker process's view of the accepted webhook secrets follows a rotation made anywhere
 * within 2 s, by the notification alone (no delivery needed), and expires old ones by the clock.
 */

let database: TestDatabase;
let runtime: EventsRuntime;
let book: WebhookSecretBook;
const log = createLogger('silent');

beforeAll(async () => {
  database = await createTestDatabase();
  runtime = createEventsRuntime({ database, logger: log });
  await runtime.start();
  book = new WebhookSecretBook(database.db, ['env-secret'], log);
  runtime.onWebhookSecretsChanged(() => void book.reload());
  await book.start();
});
afterAll(async () => {
  book?.stop();
  await runtime?.stop();
  await database?.drop();
});

/** Composio as the rotation sees it: one subscription, a fresh secret each time. */
function composio(secrets: string[]) {
  return {
    setWebhookSubscription: async () => ({ id: 'ws_1', created: false }),
    rotateWebhookSecret: async () => ({ secret: secrets.shift()! }),
  };
}

describe('the accepted webhook secrets', () => {
  it('follow a rotation within 2 s through the notification, and let the old ones expire by themselves', async () => {
    expect(book.accepted(new Date())).toEqual(['env-secret']);
    const now = new Date();
    const rotated = await rotateWebhookSecret(
      { db: database.db, composio: composio(['second-secret']) },
      { webhookUrl: 'https://broker.example/v1/webhooks/composio', keepOldForMs: 60_000, now },
    );
    expect(rotated.oldExpireAt.getTime()).toBe(now.getTime() + 60_000);
    const started = Date.now();
    await until(() => book.accepted(new Date()).includes('second-secret'), 2_000, 'the new secret');
    expect(Date.now() - started).toBeLessThan(2_000);
    expect([...book.accepted(new Date())].sort()).toEqual(['env-secret', 'second-secret']);
    // After the overlap, the environment's value is refused although still configured.
    expect(book.accepted(new Date(now.getTime() + 60_001))).toEqual(['second-secret']);

    await rotateWebhookSecret(
      { db: database.db, composio: composio(['third-secret']) },
      { webhookUrl: 'https://broker.example/v1/webhooks/composio', keepOldForMs: 10_000, now: new Date() },
    );
    await until(() => book.accepted(new Date()).includes('third-secret'), 2_000, 'the third secret');
    const later = new Date(Date.now() + 10_001);
    expect(book.accepted(later)).toEqual(['third-secret']);
  });

  it('are stored by each broker at its start, so that a rotation run anywhere ends them; one a rotation ended stays ended', async () => {
    const [before] = await database.sql<{ expires_at: Date }[]>`select expires_at from webhook_secrets where secret = 'env-secret'`;
    expect(before!.expires_at).not.toBeNull();
    const restarted = new WebhookSecretBook(database.db, ['env-secret', 'added-to-env'], log);
    await restarted.start();
    try {
      const rows = await database.sql<{ secret: string; expires_at: Date | null }[]>`
        select secret, expires_at from webhook_secrets where secret in ('env-secret', 'added-to-env') order by secret`;
      expect(rows).toEqual([
        { secret: 'added-to-env', expires_at: null },
        { secret: 'env-secret', expires_at: before!.expires_at },
      ]);
      expect(restarted.accepted(new Date(new Date(before!.expires_at).getTime() + 1))).not.toContain('env-secret');
    } finally {
      restarted.stop();
    }
  });

  it('is left as it was when Composio refuses to rotate', async () => {
    const before = await database.sql`select id, secret, expires_at from webhook_secrets order by id`;
    const refusing = {
      setWebhookSubscription: async () => ({ id: 'ws_1', created: false }),
      rotateWebhookSecret: async () => {
        throw new Error('Composio is down');
      },
    };
    await expect(
      rotateWebhookSecret(
        { db: database.db, composio: refusing },
        { webhookUrl: 'https://broker.example/v1/webhooks/composio', keepOldForMs: 60_000, now: new Date() },
      ),
    ).rejects.toThrow('Composio is down');
    expect(await database.sql`select id, secret, expires_at from webhook_secrets order by id`).toEqual(before);
  });
});

describe('the accepted webhook secrets, encrypted at rest', () => {
  let sealedDatabase: TestDatabase;
  beforeAll(async () => {
    sealedDatabase = await createTestDatabase();
  });
  afterAll(() => sealedDatabase?.drop());
  const sealing = { keys: testDataKeys(), sealing: () => true };
  const rows = () => storedSecrets(sealedDatabase.db, testDataKeys());

  it('are stored encrypted from the first by a broker that encrypts; a rotation ends them by their digest; one ended stays ended after a restart', async () => {
    const first = new WebhookSecretBook(sealedDatabase.db, ['env-secret'], log, sealing);
    await first.start();
    try {
      await first.reload();
      expect(await rows()).toEqual([{ secret: 'env-secret', expiresAt: null, sealed: true }]);
      // Inserted so, never updated: the table's first row version is the only one.
      expect((await sealedDatabase.sql`select ctid::text as at from webhook_secrets`).map((row) => row.at)).toEqual(['(0,1)']);
      expect((await sealedDatabase.sql`select count(*)::int as n from webhook_secrets where secret is not null`)[0]!.n).toBe(0);
      expect(first.accepted(new Date())).toEqual(['env-secret']);

      const now = new Date();
      await rotateWebhookSecret(
        { db: sealedDatabase.db, composio: composio(['second-secret']) },
        { webhookUrl: 'https://broker.example/v1/webhooks/composio', keepOldForMs: 60_000, now },
      );
      await first.reload();
      await first.reload();
      expect(await rows()).toEqual([
        { secret: 'env-secret', expiresAt: new Date(now.getTime() + 60_000), sealed: true },
        { secret: 'second-secret', expiresAt: null, sealed: true },
      ]);
      expect(first.accepted(new Date(now.getTime() + 60_001))).toEqual(['second-secret']);
    } finally {
      first.stop();
    }

    // A broker started again with the ended secret still configured: it is not stored again.
    const again = new WebhookSecretBook(sealedDatabase.db, ['env-secret'], log, sealing);
    await again.start();
    try {
      expect((await rows()).map((row) => row.secret)).toEqual(['env-secret', 'second-secret']);
      expect(again.accepted(new Date(Date.now() + 3_600_000))).toEqual(['second-secret']);
    } finally {
      again.stop();
    }
  });

  it('are stored in clear by a broker that does not encrypt yet, and encrypted at its first read once it does', async () => {
    const own = await createTestDatabase();
    let encrypting = false;
    const book = new WebhookSecretBook(own.db, ['later-secret'], log, { keys: testDataKeys(), sealing: () => encrypting });
    await book.start();
    try {
      const stored = () => own.sql<{ clear: boolean; sealed: boolean }[]>`
        select secret is not null as clear, sealed is not null as sealed from webhook_secrets`;
      expect(await stored()).toEqual([{ clear: true, sealed: false }]);
      encrypting = true;
      await book.reload();
      expect(await stored()).toEqual([{ clear: false, sealed: true }]);
      expect(book.accepted(new Date())).toEqual(['later-secret']);
    } finally {
      book.stop();
      await own.drop();
    }
  });

  it('that do not open are not accepted, and said', async () => {
    const warnings: string[] = [];
    const other = new WebhookSecretBook(
      sealedDatabase.db,
      [],
      { warn: (_details, message) => warnings.push(message) },
      {
        keys: dataKeys(`other:${Buffer.alloc(32, 9).toString('base64')}`),
        sealing: () => false,
      },
    );
    await other.start();
    try {
      expect(other.accepted(new Date())).toEqual([]);
      expect(warnings).toContain('a stored webhook secret does not decrypt: it is not accepted');
    } finally {
      other.stop();
    }
  });
});
