import { afterEach, describe, expect, it } from 'vitest';
import type { AppError } from '../../src/errors.js';
import { answered, type Harness, startHarness } from './harness.js';

/**
 * The SDK's own retries are off (a 429 is sent once, not three times within milliseconds), and
 * the gateway's budget honours Composio's retry-after for every call that follows.
 */

let h: Harness;
afterEach(async () => h?.close());

const rejection = (p: Promise<unknown>) =>
  answered(p).then(
    () => undefined,
    (e: unknown) => e as AppError,
  );

describe('retry suppression', () => {
  it.each([
    [429, { retryAfter: 0 }],
    [409, {}],
    [500, {}],
    [503, {}],
  ])('sends a request answered %i exactly once', async (status, extra) => {
    h = await startHarness();
    h.sim.controls.injectFault({ status, times: 3, ...extra });
    await rejection(h.gateway.getCatalog());
    expect(h.sim.controls.requests().map((r) => r.status)).toEqual([status]);
  });

  it('sends a create whose connection dropped only once', async () => {
    h = await startHarness();
    h.sim.controls.injectFault({ reset: true, times: 3 });
    expect(await rejection(h.gateway.createSession('u'))).toMatchObject({ code: 'upstream_unavailable' });
    expect(h.sim.controls.requests()).toHaveLength(1);
  });

  it('repeats a read whose connection dropped once, at once, and no more', async () => {
    h = await startHarness();
    h.sim.controls.injectFault({ reset: true, times: 1 });
    expect(await h.gateway.getCatalog()).toMatchObject({ items: expect.any(Array) });
    expect(h.sim.controls.requests()).toHaveLength(2);

    h.sim.controls.clearRequests();
    h.sim.controls.injectFault({ reset: true, times: 5 });
    expect(await rejection(h.gateway.getCatalog())).toMatchObject({ code: 'upstream_unavailable' });
    expect(h.sim.controls.requests()).toHaveLength(2);
  });
});

describe('retry-after', () => {
  it('pauses every call until retry-after has passed', async () => {
    h = await startHarness({ timeoutMs: 5_000 });
    h.sim.controls.injectFault({ status: 429, retryAfter: 1 });
    const first = await rejection(h.gateway.getCatalog());
    expect(first).toMatchObject({ code: 'upstream_rate_limited', headers: { 'retry-after': '1' } });

    // A different operation, issued at once: it waits out the pause, then succeeds.
    const page = await h.gateway.listConnectedAccounts({ userId: 'user_1', limit: 10 });
    expect(page.items).toEqual([]);
    const [limited, next] = h.sim.controls.requests();
    expect(limited?.status).toBe(429);
    expect(next?.path).toBe('/api/v3.1/connected_accounts');
    expect((next?.at ?? 0) - (limited?.at ?? 0)).toBeGreaterThanOrEqual(950);
  });

  it('refuses at once, without calling Composio, when the pause outlasts the call timeout', async () => {
    h = await startHarness({ timeoutMs: 2_000 });
    h.sim.controls.injectFault({ status: 429, retryAfter: 30 });
    await rejection(h.gateway.getCatalog());
    const started = performance.now();
    const error = await rejection(h.gateway.getCatalog());
    expect(performance.now() - started).toBeLessThan(100);
    expect(error).toMatchObject({ status: 503, code: 'upstream_rate_limited' });
    expect(Number(error?.headers['retry-after'])).toBeGreaterThanOrEqual(29);
    expect(h.sim.controls.requests()).toHaveLength(1);
    expect(h.calls.map((c) => c.outcome)).toEqual(['upstream_rate_limited', 'upstream_rate_limited']);
  });

  it('accepts retry-after as an HTTP date', async () => {
    h = await startHarness({ timeoutMs: 2_000 });
    h.sim.controls.injectFault({ status: 429, retryAfter: new Date(Date.now() + 60_000).toUTCString() });
    await rejection(h.gateway.getCatalog());
    const error = await rejection(h.gateway.getCatalog());
    expect(Number(error?.headers['retry-after'])).toBeGreaterThanOrEqual(50);
  });
});

describe('call budget', () => {
  it('paces calls beyond the burst at callsPerMinute', async () => {
    // 240 a minute: a burst of 40 (a ten-second share), then one every 250 ms.
    h = await startHarness({ callsPerMinute: 240, timeoutMs: 5_000 });
    const started = Date.now();
    await Promise.all(Array.from({ length: 42 }, () => h.gateway.getTriggerType('SLACK_RECEIVE_MESSAGE')));
    const times = h.sim.controls
      .requests()
      .map((r) => r.at - started)
      .sort((a, b) => a - b);
    expect(times).toHaveLength(42);
    expect(times[40]).toBeGreaterThanOrEqual(245);
    expect(times[41]).toBeGreaterThanOrEqual(495);
  });
});
