import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type BrokerProcess, startBroker } from '../support/broker-process.js';
import { launchChromium } from '../support/chromium.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { registerOver, until } from '../support/http.js';

/**
 * The reconnect as a person lives it, in sandbox mode (`npm start` with no Composio key, its
 * built-in simulator): connect Gmail as "work", make a trigger, the sign-in expires (the
 * simulator's control), reconnect under "work" by pressing Authorize on the consent page in
 * Chromium, and the trigger is active again by itself, with no client call; the next event
 * fired arrives on a poll.
 */

let browser: Browser;
let database: TestDatabase;
let broker: BrokerProcess;
let simulator: string;

beforeAll(async () => {
  database = await createTestDatabase();
  [browser, broker] = await Promise.all([
    launchChromium(),
    startBroker({ DATABASE_URL: database.url, TRIGGER_RECONNECT_CHECK_SECONDS: '1', CONNECTOR_REQUESTS_PER_MINUTE: '1000' }),
  ]);
  const match = /Simulator \(Composio API\):\s+(http:\/\/\S+)/.exec(broker.output());
  if (!match) throw new Error(`no simulator in the banner:\n${broker.output()}`);
  simulator = match[1]!;
}, 90_000);

afterAll(async () => {
  await browser?.close();
  expect(await broker?.stop()).toBe(0);
  await database?.drop();
}, 60_000);

async function call(auth: { authorization: string }, method: string, path: string, body?: unknown) {
  const response = await fetch(`${broker.url}${path}`, {
    method,
    headers: { ...auth, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, json: text ? JSON.parse(text) : undefined };
}

/** Asks the broker for a sign-in link under `alias`, then a person presses Authorize in Chromium. */
async function connectInBrowser(auth: { authorization: string }, alias: string): Promise<string> {
  const link = await call(auth, 'POST', '/v1/connectors/gmail/authorize', { alias });
  expect(link.status).toBe(200);
  const page = await browser.newPage();
  try {
    await page.goto(link.json.url);
    expect(await page.locator('body').textContent()).toContain(alias);
    await page.getByRole('button', { name: 'Authorize' }).click();
    await page.locator('#result').waitFor();
    expect(await page.locator('#result').textContent()).toContain('ACTIVE');
  } finally {
    await page.close();
  }
  return link.json.connectedAccountId as string;
}

async function simTriggerOn(accountId: string): Promise<string | undefined> {
  const state = (await (await fetch(`${simulator}/_sim/state`)).json()) as { triggers: { id: string; connected_account_id: string }[] };
  return state.triggers.find((trigger) => trigger.connected_account_id === accountId)?.id;
}

describe('sandbox: expire, reconnect under the label in the browser, fire, receive', () => {
  it('brings the trigger back by itself and delivers the next event', async () => {
    const who = await registerOver(broker.url);
    const work = await connectInBrowser(who.auth, 'work');
    const created = await call(who.auth, 'POST', '/v1/triggers', {
      automationId: 'auto_sandbox',
      toolkit: 'gmail',
      triggerSlug: 'GMAIL_NEW_GMAIL_MESSAGE',
      connectedAccountId: work,
      filter: { subject: 'report' },
    });
    expect(created.status).toBe(201);
    const trigger = created.json;

    // The sign-in lapses: the simulator's control sends Composio's signed expiry webhook.
    expect((await fetch(`${simulator}/_sim/accounts/${work}/expire`, { method: 'POST' })).status).toBeLessThan(400);
    await until(async () => (await call(who.auth, 'GET', `/v1/triggers/${trigger.id}`)).json.status === 'needs_reconnect', 10_000);
    const expired = await call(who.auth, 'GET', '/v1/events?wait=5');
    expect(expired.json.events.map((e: { type: string }) => e.type)).toEqual(['connection.expired']);

    const reconnected = await connectInBrowser(who.auth, 'work');
    const reconnectedAt = Date.now();
    // No client call but reading: the trigger is active again on the new account.
    await until(
      async () => (await call(who.auth, 'GET', `/v1/triggers/${trigger.id}`)).json.status === 'active',
      60_000,
      'the trigger back',
    );
    expect(Date.now() - reconnectedAt).toBeLessThan(60_000);
    expect((await call(who.auth, 'GET', `/v1/triggers/${trigger.id}`)).json).toEqual({ ...trigger, connectedAccountId: reconnected });

    const composioTrigger = await simTriggerOn(reconnected);
    expect(composioTrigger).toBeDefined();
    const fired = await fetch(`${simulator}/_sim/triggers/${composioTrigger}/fire`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ data: { subject: 'weekly report' } }),
    });
    expect(fired.status).toBeLessThan(400);
    const received = await call(who.auth, 'GET', `/v1/events?cursor=${encodeURIComponent(expired.json.cursor)}&wait=10`);
    expect(received.json.events).toMatchObject([{ type: 'trigger.event', triggerId: trigger.id, automationId: 'auto_sandbox' }]);
  }, 120_000);
});
