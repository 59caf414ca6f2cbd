import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startBroker } from '../support/broker-process.js';
import { createTestDatabase } from '../support/database.js';
import { runCli } from './support.js';

const cleanups: Array<() => Promise<unknown>> = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

describe('the operator’s path, end to end with the CLI and a broker started like `npm start`', () => {
  it('generates keys, grants a Cloud the paid plan, and revokes it through the admin API', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'omb-operator-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const keysDir = path.join(dir, 'keys');
    const privateKey = path.join(keysDir, 'operator-private.jwk.json');

    const generated = await runCli(['keys', 'generate', '--kid', 'ops-1', '--out', keysDir]);
    expect(generated.code).toBe(0);
    expect(generated.stdout).toContain('OPERATOR_PUBLIC_KEYS');
    expect(generated.stdout).not.toMatch(/"d"/);
    expect((await stat(privateKey)).mode & 0o777).toBe(0o600);
    const jwks = (await readFile(path.join(keysDir, 'operator-public.jwks.json'), 'utf8')).trim();
    expect(JSON.parse(jwks).keys[0]).toMatchObject({ kty: 'OKP', crv: 'Ed25519', kid: 'ops-1' });

    const database = await createTestDatabase();
    cleanups.push(() => database.drop());
    const broker = await startBroker({ DATABASE_URL: database.url, OPERATOR_PUBLIC_KEYS: jwks });
    cleanups.push(() => broker.stop());

    const issued = await runCli(['grant', 'issue', '--key', privateKey, '--sub', 'cloud-e2e', '--days', '30']);
    expect(issued.code).toBe(0);
    const grant = issued.stdout.trim();
    expect(grant).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+$/);
    const jti = /^grant (\S+) for cloud-e2e, valid until /m.exec(issued.stderr)?.[1];
    expect(jti).toBeDefined();

    const registered = await fetch(`${broker.url}/v1/installations`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ grant }),
    });
    expect(registered.status).toBe(201);
    const { token } = (await registered.json()) as { token: string };
    const auth = { authorization: `Bearer ${token}` };

    const paid = (await (await fetch(`${broker.url}/v1/me`, { headers: auth })).json()) as any;
    expect(paid.plan).toBe('paid');
    expect(paid.quota.eventsPerDay).toBe(2000);

    const minted = await runCli(['admin-token', '--key', privateKey, '--sub', 'e2e-operator', '--minutes', '5']);
    expect(minted.code).toBe(0);
    const adminToken = minted.stdout.trim();

    const revoked = await fetch(`${broker.url}/v1/admin/grants/${jti}/revoke`, {
      method: 'POST',
      headers: { authorization: `Bearer ${adminToken}` },
    });
    expect(revoked.status).toBe(200);
    expect(await revoked.json()).toMatchObject({ jti });

    const standard = (await (await fetch(`${broker.url}/v1/me`, { headers: auth })).json()) as any;
    expect(standard.plan).toBe('standard');
    expect(standard.quota.eventsPerDay).toBe(500);

    const stats = await fetch(`${broker.url}/v1/admin/stats`, { headers: { authorization: `Bearer ${adminToken}` } });
    expect(((await stats.json()) as any).installations).toMatchObject({ total: 1, byPlan: { standard: 1, paid: 0 } });

    expect(await broker.stop()).toBe(0);
    const output = broker.output();
    expect(output).toContain('"operator":"e2e-operator"');
    for (const secret of [grant, adminToken, token]) expect(output).not.toContain(secret.split('.').pop()!);
  }, 90_000);
});
