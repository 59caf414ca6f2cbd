import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/db/embedded.js';
import { type BrokerProcess, startBroker } from '../support/broker-process.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { rawRequest, until } from '../support/http.js';
import { type RunningNginx, renderShippedConf, startNginx } from '../support/nginx.js';

/**
 * The shipped balancer (docker/nginx.conf, run by Debian's nginx) in front of a spawned broker
 * configured as docker/compose.yml configures it (TRUST_PROXY=1). A client that writes its own
 * X-Forwarded-For cannot pick the address the registration limit counts: every forged address
 * still counts as the client's own, and another client still has its own allowance. In the
 * `system` project (`npm run test:system`) because it needs Debian's `nginx` package; without it
 * these tests fail, saying what to install.
 */

const LIMIT = 3;
let database: TestDatabase;
let broker: BrokerProcess;
let nginx: RunningNginx;

beforeAll(async () => {
  database = await createTestDatabase();
  broker = await startBroker({ DATABASE_URL: database.url, TRUST_PROXY: '1', REGISTRATIONS_PER_MINUTE: String(LIMIT) });
  const port = await freePort();
  const conf = await renderShippedConf({ upstream: new URL(broker.url).host, listen: `127.0.0.1:${port}` });
  nginx = await startNginx(conf, port);
}, 90_000);

afterAll(async () => {
  await nginx?.stop();
  await broker?.stop();
  await database?.drop();
});

const register = (from: string, forwardedFor?: string) =>
  rawRequest(`${nginx.url}/v1/installations`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(forwardedFor ? { 'x-forwarded-for': forwardedFor } : {}) },
    body: '{}',
    localAddress: from,
  });

describe('the client address behind the shipped nginx', () => {
  it('counts registrations by the client’s real address whatever X-Forwarded-For it sends', async () => {
    // One client rotating forged addresses, in every form a forger might try.
    const forged = ['203.0.113.1', '203.0.113.2, 198.51.100.9', '10.9.8.7'];
    for (const address of forged) expect((await register('127.0.0.2', address)).status).toBe(201);
    const refused = await register('127.0.0.2', '198.51.100.77');
    expect(refused.status).toBe(429);
    expect(refused.json).toMatchObject({ error: expect.any(String) });
    expect((await register('127.0.0.2')).status).toBe(429);

    // Another client behind the same nginx has its own allowance: the limit sees clients, not nginx.
    expect((await register('127.0.0.3', '127.0.0.2')).status).toBe(201);

    // The broker's request log names the client nginx saw, never a forged address.
    const lines = () =>
      broker
        .output()
        .split('\n')
        .filter((line) => line.includes('"url":"/v1/installations"'));
    await until(() => lines().some((line) => line.includes('"ip":"127.0.0.3"')), 5_000, 'the request log line');
    expect(lines().length).toBe(LIMIT + 3);
    expect(lines().some((line) => line.includes('"ip":"127.0.0.2"'))).toBe(true);
    expect(lines().some((line) => line.includes('"ip":"127.0.0.3"'))).toBe(true);
    expect(broker.output()).not.toMatch(/"ip":"(203\.0\.113|198\.51\.100|10\.9\.8)/);
  });

  it('does not serve /metrics through the balancer', async () => {
    expect((await rawRequest(`${nginx.url}/metrics`, { localAddress: '127.0.0.4' })).status).toBe(404);
    expect((await rawRequest(`${nginx.url}/health`, { localAddress: '127.0.0.4' })).status).toBe(200);
  });
});
