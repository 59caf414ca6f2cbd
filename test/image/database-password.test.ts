import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { loadConfig } from '../../src/config.js';

/**
 * docker/compose.yml passes the database password apart from DATABASE_URL (DATABASE_PASSWORD),
 * so a password with URL characters in it (`@ : / # % ?`) still reaches Postgres intact.
 */

const role = `omb_pw_${randomBytes(4).toString('hex')}`;
const password = `p@ss:/w#rd%?x y&${randomBytes(4).toString('hex')}`;
let admin: postgres.Sql;

beforeAll(async () => {
  admin = postgres(inject('pgAdminUrl'), { max: 1, onnotice: () => {} });
  await admin.unsafe(`create role ${role} login password '${password.replaceAll("'", "''")}'`);
});

afterAll(async () => {
  await admin.unsafe(`drop role if exists ${role}`);
  await admin.end();
});

/** The URL the broker would connect with, for this role and password. */
function brokerUrl(pass: string): string {
  const server = new URL(inject('pgAdminUrl'));
  return loadConfig({ DATABASE_URL: `postgres://${role}@${server.host}/postgres`, DATABASE_PASSWORD: pass }).databaseUrl!;
}

async function whoAmI(url: string): Promise<string> {
  const sql = postgres(url, { max: 1, onnotice: () => {}, connect_timeout: 10 });
  try {
    const [row] = await sql<{ user: string }[]>`select current_user as user`;
    return row!.user;
  } finally {
    await sql.end();
  }
}

describe('DATABASE_PASSWORD', () => {
  it('reaches Postgres intact whatever characters it holds', async () => {
    expect(await whoAmI(brokerUrl(password))).toBe(role);
  });

  it('is really checked by this server (a wrong one is refused)', async () => {
    await expect(whoAmI(brokerUrl(`${password}-wrong`))).rejects.toThrow(/password/i);
  });

  it('is refused beside a URL that holds a password already, or without a URL', () => {
    expect(() => loadConfig({ DATABASE_URL: 'postgres://u:p@db/x', DATABASE_PASSWORD: 'q' })).toThrow(/DATABASE_PASSWORD/);
    expect(() => loadConfig({ DATABASE_PASSWORD: 'q' })).toThrow(/DATABASE_PASSWORD/);
  });
});
