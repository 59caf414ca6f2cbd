import { rm } from 'node:fs/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/db/embedded.js';
import { type BrokerProcess, startBroker } from '../support/broker-process.js';
import { initialisedFolder } from '../support/data-folder.js';
import { registerOver, until } from '../support/http.js';

/**
 * A sandbox broker (no Composio key, embedded Postgres) restarted on the same data folder: the
 * simulator's world is kept in that Postgres and its port is stable, so what a person connected
 * before the restart is still connected, triggers still fire to the broker, and a consent link
 * handed out before the restart still opens and works.
 */

const cleanups: Array<() => Promise<unknown>> = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
}, 60_000);

async function post(url: string, auth: Record<string, string>, body: unknown): Promise<{ status: number; body: any }> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: await response.json() };
}

/** Presses Authorize on the simulator's consent page the link opens. */
async function authorize(consentUrl: string): Promise<void> {
  const page = await fetch(consentUrl);
  expect(page.status).toBe(200);
  const action = /action="([^"]+\/authorize)"/.exec(await page.text())?.[1];
  expect(action).toBeDefined();
  const answer = await fetch(new URL(action!, consentUrl), { method: 'POST', redirect: 'manual' });
  expect(answer.status).toBeLessThan(400);
}

describe('a restarted sandbox broker', () => {
  it('still lists the accounts and triggers, a trigger still fires to it, and an earlier consent link still works', async () => {
    const dataDir = await initialisedFolder('omb-sandbox-restart-');
    cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
    const port = await freePort();
    // PORT + 1 by default; a free port here, as the test cannot be sure PORT + 1 is free.
    const env = { DATA_DIR: dataDir, PORT: String(port), SANDBOX_PORT: String(await freePort()) };
    const start = async (): Promise<BrokerProcess> => {
      const broker = await startBroker(env);
      cleanups.push(() => broker.stop('SIGKILL'));
      return broker;
    };

    const first = await start();
    const who = await registerOver(first.url);
    const work = await post(`${first.url}/v1/connectors/gmail/authorize`, who.auth, { alias: 'work' });
    expect(work.status).toBe(200);
    await authorize(work.body.url);
    const home = await post(`${first.url}/v1/connectors/gmail/authorize`, who.auth, { alias: 'home' });
    expect(home.status).toBe(200);
    const trigger = await post(`${first.url}/v1/triggers`, who.auth, {
      automationId: 'boss-mail',
      toolkit: 'gmail',
      triggerSlug: 'GMAIL_NEW_GMAIL_MESSAGE',
      connectedAccountId: work.body.connectedAccountId,
      filter: { from: 'boss@example.com' },
    });
    expect(trigger.status).toBe(201);
    const connectedBefore = await (await fetch(`${first.url}/v1/connectors/connected`, { headers: who.auth })).json();
    expect(await first.stop()).toBe(0);

    const second = await start();
    expect(second.output()).toContain('"restored":true');
    const connected = await (await fetch(`${second.url}/v1/connectors/connected`, { headers: who.auth })).json();
    expect(connected).toEqual(connectedBefore);
    expect(JSON.stringify(connected)).toContain(work.body.connectedAccountId);
    const triggers = (await (await fetch(`${second.url}/v1/triggers`, { headers: who.auth })).json()) as { triggers: any[] };
    expect(triggers.triggers).toMatchObject([{ id: trigger.body.id, status: 'active' }]);

    // The simulator still has the Composio trigger: firing it reaches the broker's queue.
    const simulator = new URL(work.body.url).origin;
    const state = (await (await fetch(`${simulator}/_sim/state`)).json()) as { triggers: Array<{ id: string; trigger_config: any }> };
    expect(state.triggers).toHaveLength(1);
    const fired = await fetch(`${simulator}/_sim/triggers/${encodeURIComponent(state.triggers[0]!.id)}/fire`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ data: { subject: 'after the restart', sender: 'boss@example.com' } }),
    });
    expect(fired.status).toBeLessThan(400);
    let events: any[] = [];
    await until(
      async () => {
        const answer = (await (await fetch(`${second.url}/v1/events?wait=1`, { headers: who.auth })).json()) as { events: any[] };
        events = answer.events;
        return events.length > 0;
      },
      15_000,
      'the event in the queue',
    );
    expect(events).toMatchObject([{ type: 'trigger.event', data: { subject: 'after the restart' } }]);

    // The consent link handed out before the restart opens on the same origin and still works.
    await authorize(home.body.url);
    const after = await (await fetch(`${second.url}/v1/connectors/connected`, { headers: who.auth })).json();
    expect(JSON.stringify(after)).toContain(home.body.connectedAccountId);
    expect(await second.stop()).toBe(0);
  }, 120_000);
});
