import { afterEach, describe, expect, it } from 'vitest';
import { ComposioFailure, createComposioGateway } from '../../src/composio/index.js';
import { AppError } from '../../src/errors.js';
import { answered, connectAccount, type Harness, silentLogger, startHarness } from './harness.js';

/** Every way Composio can fail, as the broker's own failures and as a client then sees them. */

let h: Harness;
afterEach(async () => h?.close());

async function failure(promise: Promise<unknown>): Promise<AppError> {
  const failed = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(failed).toBeInstanceOf(ComposioFailure);
  const error = await answered(Promise.reject(failed)).catch((e: unknown) => e);
  expect(error).toBeInstanceOf(AppError);
  return error as AppError;
}

describe('Composio errors become failures, answered as the broker’s errors', () => {
  it('maps 404 to composio_not_found', async () => {
    h = await startHarness();
    const error = await failure(h.gateway.deleteConnectedAccount('ca_missing', { revoke: false }));
    expect(error).toMatchObject({ status: 404, code: 'composio_not_found' });
    expect(error.message).toContain('ca_missing');
    expect((await failure(h.gateway.getSession('trs_missing'))).code).toBe('composio_not_found');
    expect((await failure(h.gateway.deleteTrigger('ti_missing'))).code).toBe('composio_not_found');
    expect(h.calls.at(-1)).toMatchObject({ operation: 'triggers.delete', outcome: 'composio_not_found' });
  });

  it('maps an unknown trigger type (Composio answers 400) to composio_not_found', async () => {
    h = await startHarness();
    expect((await failure(h.gateway.getTriggerType('GMAIL_NO_SUCH_TRIGGER'))).code).toBe('composio_not_found');
  });

  it('maps a duplicate alias (409) to composio_conflict with Composio’s sentence', async () => {
    h = await startHarness();
    const { session } = await connectAccount(h, 'user_1', 'gmail', 'work');
    const error = await failure(h.gateway.createLink(session.sessionId, 'gmail', { alias: 'Work' }));
    // Composio's own 409 is not the broker's: a refusal with its sentence.
    expect(error).toMatchObject({ status: 422, code: 'composio_conflict' });
    expect(error.message).toMatch(/alias 'Work' already exists/);
  });

  it('maps “does not manage auth” on link to auth_config_required (422)', async () => {
    h = await startHarness();
    const session = await h.gateway.createSession('user_1');
    const error = await failure(h.gateway.createLink(session.sessionId, 'xero', { alias: 'books' }));
    expect(error.status).toBe(422);
    expect(error.code).toBe('auth_config_required');
    expect(error.message).toBe(
      'The managed service cannot connect xero: it has no Composio-managed sign-in. The owner can add their own Composio project key in Settings → API keys.',
    );
  });

  it('maps a signed-out account to reconnect_required with the COMPOSIO_MANAGE_CONNECTIONS sentence', async () => {
    h = await startHarness();
    const session = await h.gateway.createSession('user_1');
    h.sim.controls.injectFault({ status: 400, message: 'USER_NOT_LOGGED_IN: connected account is expired', path: '/api/v3.1/tool_router' });
    const error = await failure(h.gateway.createLink(session.sessionId, 'gmail', { alias: 'work' }));
    expect(error).toMatchObject({ status: 409, code: 'reconnect_required' });
    expect(error.message).toBe('The gmail account is signed out; call COMPOSIO_MANAGE_CONNECTIONS to reconnect it.');
  });

  it('maps a 429 to 503 upstream_rate_limited with retry-after', async () => {
    h = await startHarness();
    h.sim.controls.injectFault({ status: 429, retryAfter: 0 });
    const error = await failure(h.gateway.getCatalog());
    expect(error).toMatchObject({ status: 503, code: 'upstream_rate_limited', headers: { 'retry-after': '1' } });
    expect(h.calls).toEqual([expect.objectContaining({ operation: 'catalog.get', outcome: 'upstream_rate_limited' })]);
  });

  it.each([500, 502, 503])('maps a %i to 502 upstream_unavailable', async (status) => {
    h = await startHarness();
    h.sim.controls.injectFault({ status });
    const error = await failure(h.gateway.listConnectedAccounts({ userId: 'u', limit: 10 }));
    expect(error).toMatchObject({ status: 502, code: 'upstream_unavailable' });
    expect(error.message).toBe(`Composio is having trouble (HTTP ${status}); try again shortly.`);
  });

  it('maps a dropped connection to upstream_unavailable', async () => {
    h = await startHarness();
    h.sim.controls.injectFault({ reset: true });
    const error = await failure(h.gateway.createSession('user_1'));
    expect(error).toMatchObject({ status: 502, code: 'upstream_unavailable' });
    expect(error.message).toBe('Composio could not be reached; try again shortly.');
  });

  it('maps Composio being down (nothing listening) to upstream_unavailable', async () => {
    h = await startHarness();
    await h.sim.close();
    const error = await failure(h.gateway.createSession('user_1'));
    expect(error).toMatchObject({ status: 502, code: 'upstream_unavailable' });
  });

  it('bounds each call by timeoutMs', async () => {
    h = await startHarness({ timeoutMs: 300 });
    h.sim.controls.injectFault({ delayMs: 5_000 });
    const started = performance.now();
    const error = await failure(h.gateway.getCatalog());
    const elapsed = performance.now() - started;
    expect(error).toMatchObject({ status: 502, code: 'upstream_unavailable' });
    expect(error.message).toBe('Composio did not answer within 1 s; try again shortly.');
    expect(elapsed).toBeGreaterThanOrEqual(290);
    expect(elapsed).toBeLessThan(2_000);
    // One attempt only: the SDK does not retry the timeout either.
    expect(h.sim.controls.requests()).toHaveLength(1);
  });

  it('treats a refused project key as an outage, not as the person’s problem', async () => {
    h = await startHarness();
    const wrongKey = createComposioGateway({
      apiKey: 'not-the-key',
      baseUrl: h.sim.origin,
      callsPerMinute: 600,
      timeoutMs: 2_000,
      logger: silentLogger,
    });
    const error = await failure(wrongKey.getCatalog());
    expect(error).toMatchObject({ status: 502, code: 'upstream_unavailable' });
    expect(error.message).toMatch(/project key/);
  });

  it('maps other 400s to 422 composio_rejected with Composio’s message', async () => {
    h = await startHarness();
    const { accountId } = await connectAccount(h, 'user_1', 'github', 'work');
    const error = await failure(
      h.gateway.upsertTrigger({ userId: 'user_1', slug: 'GITHUB_COMMIT_EVENT', connectedAccountId: accountId, config: { owner: 'ada' } }),
    );
    expect(error).toMatchObject({ status: 422, code: 'composio_rejected', message: 'trigger_config.repo is required.' });
  });
});

describe('a project key without permission', () => {
  it('maps 403 to composio_forbidden so callers can fall back', async () => {
    h = await startHarness();
    h.sim.controls.injectFault({ status: 403, message: 'API key does not have the required scope' });
    const error = await failure(h.gateway.listConnectedAccounts({ userId: 'u', limit: 50 }));
    expect(error).toMatchObject({ status: 502, code: 'composio_forbidden' });
  });
});
