import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { systemClock } from '../../src/clock.js';
import { createComposioGateway } from '../../src/composio/index.js';
import { createLogger } from '../../src/logger.js';
import * as actions from '../../src/operators/actions.js';
import type { Actor } from '../../src/operators/audit.js';
import { type Simulator, startSimulator } from '../../src/sim/index.js';
import { buildTestApp, register, type TestApp } from '../support/app.js';
import {
  adminClaims,
  type AuditRow as OperatorAuditRow,
  operatorKey,
  runCli,
  signClaims,
  type TestOperatorKey,
  trusting,
} from './support.js';

// The real actions, watched: proves which function a route or a command went through.
vi.mock('../../src/operators/actions.js', async (importOriginal) => {
  const real = await importOriginal<typeof import('../../src/operators/actions.js')>();
  return { ...real, disable: vi.fn(real.disable), rotateSecret: vi.fn(real.rotateSecret) };
});

let t: TestApp;
let key: TestOperatorKey;
let sim: Simulator;
beforeAll(async () => {
  key = await operatorKey('op-1');
  t = await buildTestApp({ ...trusting(key) });
  sim = await startSimulator({ apiKey: 'sim_actions_key', logger: false });
});
afterAll(async () => {
  await sim.close();
  await t.close();
});

type AuditRow = OperatorAuditRow & { details: Record<string, unknown> };
const lastRows = (action: string, count: number) =>
  t.database.sql<AuditRow[]>`
    select operator, token_id, source, action, target, outcome, details from operator_audit
     where action = ${action} order by id desc limit ${count}`.then((rows) => [...rows].reverse());
const apiActor = (operator: string, tokenId: string): Actor => ({ operator, tokenId, source: 'api' });
const cliActor = (operator: string): Actor => ({ operator, tokenId: null, source: 'cli' });
/** The same row but for who acted. */
const asActor = (row: AuditRow, actor: Actor): AuditRow => ({
  ...row,
  operator: actor.operator,
  token_id: actor.tokenId,
  source: actor.source,
});
const actorColumns = (actor: Actor) => ({ operator: actor.operator, token_id: actor.tokenId, source: actor.source });

describe('an operator action is one function, whoever calls it', () => {
  it('rotate-secret: the CLI command calls `rotateSecret`, which writes the same row for an admin actor', async () => {
    const rotateSecret = vi.mocked(actions.rotateSecret);
    rotateSecret.mockClear();
    const webhookUrl = 'https://broker.example/v1/webhooks/composio';
    const env = {
      COMPOSIO_API_KEY: sim.apiKey,
      COMPOSIO_BASE_URL: sim.origin,
      COMPOSIO_WEBHOOK_SECRET: 'the-old-secret',
      PUBLIC_URL: 'https://broker.example',
      DATABASE_URL: t.database.url,
    };
    const rotated = await runCli(['webhook', 'rotate-secret', '--as', 'erin', '--keep-old-for', '1h'], env);
    expect(rotated.code).toBe(0);
    expect(rotateSecret).toHaveBeenCalledTimes(1);
    expect(rotateSecret).toHaveBeenCalledWith(
      expect.anything(),
      cliActor('erin'),
      expect.objectContaining({ webhookUrl, keepOldForMs: 3_600_000 }),
    );
    // The CLI's own COMPOSIO_WEBHOOK_SECRET is no part of a rotation.
    expect(JSON.stringify(rotateSecret.mock.calls[0]![2])).not.toContain('the-old-secret');
    const [fromCli] = await lastRows('webhook.rotate-secret', 1);
    expect(fromCli).toMatchObject({ ...actorColumns(cliActor('erin')), outcome: 'rotated', details: {} });
    expect(JSON.stringify(fromCli)).not.toContain(rotated.stdout.trim());

    // The call an admin route would make: the same function, the same row but for the actor.
    const composio = createComposioGateway({
      apiKey: sim.apiKey,
      baseUrl: sim.origin,
      callsPerMinute: 600,
      timeoutMs: 5000,
      logger: createLogger('silent'),
    });
    const admin = apiActor('ana', 'jti-rotate');
    const direct = await actions.rotateSecret({ database: t.database, clock: systemClock }, admin, {
      composio,
      webhookUrl,
      keepOldForMs: 3_600_000,
    });
    expect(rotateSecret).toHaveBeenCalledTimes(2);
    const [fromApi] = await lastRows('webhook.rotate-secret', 1);
    expect(fromApi).toEqual(asActor(fromCli!, admin));
    expect(JSON.stringify(fromApi)).not.toContain(direct.secret);
  });

  it('disable: the admin route calls `disable` with the token as actor, and a CLI actor gets the same row', async () => {
    const disable = vi.mocked(actions.disable);
    disable.mockClear();
    const claims = adminClaims(t.clock.now(), { sub: 'bea' });
    const headers = { authorization: `Bearer ${await signClaims(key, claims)}` };
    const { installationId } = await register(t.app);

    const response = await t.app.inject({ method: 'POST', url: `/v1/admin/installations/${installationId}/disable`, headers });
    expect(response.statusCode).toBe(200);
    const admin = apiActor('bea', claims.jti as string);
    expect(disable).toHaveBeenCalledTimes(1);
    expect(disable).toHaveBeenCalledWith(expect.anything(), admin, installationId);
    const lines = t.logs.lines.map((l) => JSON.parse(l)).filter((l) => l.msg === 'operator action' && l.installationId === installationId);
    expect(lines).toMatchObject([{ operator: 'bea', action: 'disable' }]);

    // Enabled again, then disabled as an operator at the terminal would: the same row but for the actor.
    const ctx = { database: t.database, clock: t.clock, log: createLogger('silent') };
    await actions.enable(ctx, admin, installationId);
    await actions.disable(ctx, cliActor('carl'), installationId);
    const [fromApi, fromCli] = await lastRows('installation.disable', 2);
    expect(fromApi).toEqual({
      ...actorColumns(admin),
      action: 'installation.disable',
      target: installationId,
      outcome: 'disabled',
      details: {},
    });
    expect(fromCli).toEqual(asActor(fromApi!, cliActor('carl')));
  });
});
