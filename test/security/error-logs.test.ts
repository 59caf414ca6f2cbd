import { randomUUID } from 'node:crypto';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installations } from '../../src/db/schema.js';
import { createLogger } from '../../src/logger.js';
import { grantClaims, operatorKey, signClaims, type TestOperatorKey, trusting } from '../operators/support.js';
import { buildTestApp, LogCapture, register, type TestApp } from '../support/app.js';

/**
 * A statement that fails is logged by its name, its error's code and reason, never the values
 * bound to it: those are grants' ids, the Clouds' names, installations' ids.
 */

let t: TestApp;
let key: TestOperatorKey;
beforeAll(async () => {
  key = await operatorKey('op-logs');
  t = await buildTestApp({ ...trusting(key) });
});
afterAll(() => t.close());

const logged = (logs: LogCapture, msg: string) => logs.lines.filter((line) => (JSON.parse(line) as { msg?: string }).msg === msg);

describe('a failed statement in the error log', () => {
  it('names the statement and the reason of a request’s failed insert, never its values', async () => {
    const { installationId, auth } = await register(t.app);
    const subject = `cloud-${randomUUID()}`;
    const claims = grantClaims(t.clock.now(), { sub: subject });
    // A constraint this test adds makes the grant's insert fail, as any database refusal would.
    await t.database.sql.unsafe(`alter table grants add constraint grants_refuse_probe check (subject <> '${subject}')`);
    try {
      const response = await t.app.inject({
        method: 'PUT',
        url: '/v1/me/grant',
        headers: auth,
        payload: { grant: await signClaims(key, claims) },
      });
      expect(response.statusCode).toBe(500);
      expect(response.json()).toEqual({ error: 'the broker hit an unexpected error; try again', code: 'internal' });
    } finally {
      await t.database.sql.unsafe('alter table grants drop constraint grants_refuse_probe');
    }

    const [line] = logged(t.logs, 'unexpected error');
    expect(line).toBeDefined();
    const { err } = JSON.parse(line!) as { err: Record<string, unknown> };
    expect(err).toMatchObject({
      type: 'DrizzleQueryError',
      statement: 'insert into grants',
      code: '23514',
      message: expect.stringContaining('violates check constraint "grants_refuse_probe"'),
    });
    expect(Object.keys(err)).not.toEqual(expect.arrayContaining(['params']));
    expect(Object.keys(err)).not.toEqual(expect.arrayContaining(['query']));
    // The jti, the subject and the holder were the insert's values (and the detail's row).
    for (const value of [claims.jti!, subject, installationId]) expect(line).not.toContain(value);
    expect(t.logs.text).not.toContain(claims.jti!);
    expect(t.logs.text).not.toContain(subject);
  });

  it('leaves out a value a Postgres error quotes, from postgres.js and from drizzle alike', async () => {
    const logs = new LogCapture();
    const log = createLogger('info', logs);
    const value = `not-a-uuid-${randomUUID()}`;
    const direct = await t.database.sql`select ${value}::uuid`.catch((error: unknown) => error);
    const built = await t.database.db
      .select()
      .from(installations)
      .where(eq(installations.id, value))
      .catch((error: unknown) => error);
    // Both did fail on the value, which Postgres quotes in its message and its context.
    expect(String((direct as Error).message)).toContain(value);
    expect(String((built as Error).message)).toContain(value);

    log.error({ err: direct }, 'direct');
    log.error({ err: built }, 'built');
    log.error({ err: new Error('the read failed', { cause: built }) }, 'wrapped');
    log.error(built as Error, 'as the first argument');
    log.flush();

    expect(logs.lines).toHaveLength(4);
    expect(logs.text).not.toContain(value);
    expect(JSON.parse(logged(logs, 'direct')[0]!).err).toMatchObject({ type: 'PostgresError', code: '22P02', statement: 'select' });
    expect(JSON.parse(logged(logs, 'built')[0]!).err).toMatchObject({
      type: 'DrizzleQueryError',
      code: '22P02',
      statement: 'select from installations',
      message: expect.stringMatching(/^query failed: select from installations: invalid input syntax for type uuid/),
    });
    expect(JSON.parse(logged(logs, 'wrapped')[0]!).err).toMatchObject({
      type: 'Error',
      message: expect.stringMatching(/^the read failed: query failed: select from installations: /),
      stack: expect.stringContaining('caused by: Error: query failed: select from installations'),
    });
  });

  it('keeps the rest of an error as pino writes it', async () => {
    const logs = new LogCapture();
    const error = Object.assign(new Error('the catalog is stale'), { code: 'E_STALE', toolkit: 'gmail' });
    createLogger('info', logs).warn({ err: error }, 'stale');
    expect(JSON.parse(logs.lines[0]!).err).toEqual({
      type: 'Error',
      message: 'the catalog is stale',
      stack: error.stack,
      code: 'E_STALE',
      toolkit: 'gmail',
    });
  });
});
