import { afterEach, describe, expect, it } from 'vitest';
import { type Budget, CallBudget } from '../../src/composio/index.js';
import { startHarness } from '../composio/harness.js';
import { buildTestApp } from '../support/app.js';
import { until } from '../support/http.js';
import { type ConnectorsWorld, member } from './support.js';

/**
 * One installation flooding cannot starve another of Composio: each installation's calls queue
 * behind its own earlier calls, and the next call budget goes to the installation served least
 * recently. The budget here is 120 calls a minute: a burst of 20, then one call every 500 ms.
 */

let w: ConnectorsWorld;
afterEach(async () => w?.close());

/**
 * The gateway's own budget (120 calls a minute, as the broker's would be), which the test may
 * lift once the victim has been measured: the flooder's remaining backlog (many seconds at two
 * calls a second) then goes out at once rather than being waited for.
 */
function liftableBudget(callsPerMinute: number, maxWaitMs: number): { budget: Budget; lift(): void } {
  let lifted = false;
  const sleepers = new Set<() => void>();
  const paced = new CallBudget({
    callsPerMinute,
    maxWaitMs,
    sleep: (ms) =>
      new Promise<void>((resolve) => {
        const wake = () => {
          clearTimeout(timer);
          sleepers.delete(wake);
          resolve();
        };
        const timer = setTimeout(wake, ms);
        sleepers.add(wake);
      }),
  });
  return {
    budget: {
      acquire: (cost, wait, keepReserve) => (lifted ? Promise.resolve() : paced.acquire(cost, wait, keepReserve)),
      pause: (ms) => paced.pause(ms),
    },
    lift() {
      lifted = true;
      for (const wake of [...sleepers]) wake();
    },
  };
}

describe('the Composio budget shared between installations', () => {
  it("serves a victim's call before a flooder's queued backlog", async () => {
    const paced = liftableBudget(120, 20_000);
    const h = await startHarness({ callsPerMinute: 120, timeoutMs: 20_000, budget: paced.budget });
    const t = await buildTestApp({ CONNECTOR_REQUESTS_PER_MINUTE: '10000', COMPOSIO_TIMEOUT_MS: '20000' }, { composio: h.gateway });
    w = {
      t,
      h,
      close: async () => {
        await t.close();
        await h.close();
      },
    };
    const flooder = await member(t.app);
    const victim = await member(t.app);
    const connected = (who: { auth: { authorization: string } }) =>
      t.app.inject({ method: 'GET', url: '/v1/connectors/connected', headers: who.auth });

    let flooderAnswered = 0;
    const flood = Array.from({ length: 40 }, async () => {
      const response = await connected(flooder);
      flooderAnswered++;
      return response;
    });
    // The burst is spent and the flooder's backlog is queued.
    await until(() => h.sim.controls.requests().length >= 20, 10_000, 'the burst spent');
    await new Promise((resolve) => setTimeout(resolve, 200));

    const started = performance.now();
    const answer = await connected(victim);
    const took = performance.now() - started;
    const flooderPending = 40 - flooderAnswered;
    expect(answer.statusCode).toBe(200);
    // In arrival order the victim would wait for the whole backlog (many seconds at two calls a
    // second); queued per installation it waits for the next token or two.
    expect(flooderPending).toBeGreaterThanOrEqual(10);
    expect(took).toBeLessThan(5_000);
    // Measured: the backlog need not be waited for at two calls a second, and is served in full.
    paced.lift();
    const flooded = await Promise.all(flood);
    expect(flooded.map((response) => response.statusCode)).toEqual(Array(40).fill(200));
  }, 60_000);
});
