import { rm } from 'node:fs/promises';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type BrokerProcess, startBroker } from '../support/broker-process.js';
import { launchChromium } from '../support/chromium.js';
import { initialisedFolder } from '../support/data-folder.js';
import { type Registered, registerOver, until } from '../support/http.js';

/**
 * The sandbox simulator's `/_sim` page in a real (headless) Chromium, in front of a sandbox
 * broker: it says whose each trigger is (installation, automation, Gmail query), shows errors on
 * the page, lays a typed payload over the sample event, offers Expire only where an account can
 * expire, and shows the project key the webhook CLI commands need.
 */

let browser: Browser;
let broker: BrokerProcess;
let dataDir: string;

beforeAll(async () => {
  dataDir = await initialisedFolder('omb-sim-page-');
  [browser, broker] = await Promise.all([launchChromium(), startBroker({ DATA_DIR: dataDir })]);
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await broker?.stop();
  await rm(dataDir, { recursive: true, force: true });
}, 60_000);

async function post(who: Registered, route: string, body: unknown): Promise<any> {
  const response = await fetch(`${broker.url}${route}`, {
    method: 'POST',
    headers: { ...who.auth, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  expect(response.status).toBeLessThan(300);
  return response.json();
}

describe('the simulator page', () => {
  it('names each trigger’s installation, automation and Gmail query, shows errors on the page, merges payloads, and shows the key', async () => {
    const who = await registerOver(broker.url);
    const work = await post(who, '/v1/connectors/gmail/authorize', { alias: 'work' });
    const home = await post(who, '/v1/connectors/gmail/authorize', { alias: 'home' });
    const simulator = new URL(work.url).origin;
    const page = await browser.newPage();
    try {
      await page.goto(work.url);
      await page.getByRole('button', { name: 'Authorize' }).click();
      await page.locator('#result').waitFor();
      const trigger = await post(who, '/v1/triggers', {
        automationId: 'mail-from-the-boss',
        toolkit: 'gmail',
        triggerSlug: 'GMAIL_NEW_GMAIL_MESSAGE',
        connectedAccountId: work.connectedAccountId,
        filter: { from: 'boss@example.com', subject: 'report' },
      });

      const opened = await page.goto(`${simulator}/_sim`);
      expect(opened?.status()).toBe(200);
      const row = page.locator('#triggers tr[data-trigger]');
      expect(await row.count()).toBe(1);
      const cells = await row.locator('td').allTextContents();
      expect(cells[0]).toBe(who.installationId);
      expect(cells[1]).toBe('mail-from-the-boss');
      expect(cells[2]).toBe('from:"boss@example.com" subject:"report"');

      // Expire only for the ACTIVE account, not for the one still waiting for consent.
      const accountRow = (id: string) => page.locator('#accounts tr', { hasText: id });
      expect(await accountRow(work.connectedAccountId).getByRole('button', { name: 'Expire' }).count()).toBe(1);
      expect(await accountRow(home.connectedAccountId).getByRole('button', { name: 'Expire' }).count()).toBe(0);

      // The key shown works with the simulator's API, as the CLI would use it.
      const cli = (await page.locator('#cli').textContent()) ?? '';
      const key = /COMPOSIO_API_KEY=(\S+)/.exec(cli)?.[1] ?? '';
      expect(cli).toContain(`COMPOSIO_BASE_URL=${simulator}`);
      expect(cli).toContain(`PUBLIC_URL=${broker.url}`);
      expect((await fetch(`${simulator}/api/v3/toolkits`, { headers: { 'x-api-key': key } })).status).toBe(200);
      expect((await fetch(`${simulator}/api/v3/toolkits`, { headers: { 'x-api-key': `${key}x` } })).status).toBe(401);

      // A mistake in the payload: said on the page, with the page still there.
      await row.locator('textarea').fill('{"subject": ');
      const [refused] = await Promise.all([
        page.waitForResponse((r) => r.url().includes('/fire')),
        row.getByRole('button', { name: 'Fire' }).click(),
      ]);
      expect(refused.status()).toBe(400);
      expect(refused.headers()['content-type']).toContain('text/html');
      await page.locator('#error').waitFor();
      expect(await page.locator('#error').textContent()).toContain('data must be a JSON object');
      expect(await page.locator('h1').textContent()).toBe('Composio simulator');

      // A custom payload laid over the sample: the typed subject, the sample's other fields.
      await page.locator('#triggers tr[data-trigger] textarea').fill('{"subject": "Quarterly report", "sender": "boss@example.com"}');
      await page.locator('#triggers tr[data-trigger]').getByRole('button', { name: 'Fire' }).click();
      await page.locator('.notice').waitFor();
      expect(await page.locator('.notice').textContent()).toMatch(/answered 200/);
      let events: any[] = [];
      await until(
        async () => {
          const answer = (await (await fetch(`${broker.url}/v1/events?wait=1`, { headers: who.auth })).json()) as { events: any[] };
          events = answer.events;
          return events.length > 0;
        },
        10_000,
        'the fired event in the queue',
      );
      expect(events).toHaveLength(1);
      expect(events[0]).toMatchObject({ type: 'trigger.event', triggerId: trigger.id, automationId: 'mail-from-the-boss' });
      expect(events[0].data).toMatchObject({ subject: 'Quarterly report', sender: 'boss@example.com' });
      expect(events[0].data.message_id, 'a field from the sample').toEqual(expect.any(String));
      expect(events[0].data.message_text, 'a field from the sample').toEqual(expect.any(String));

      if (process.env.SIM_PAGE_SCREENSHOT) await page.screenshot({ path: process.env.SIM_PAGE_SCREENSHOT, fullPage: true });
    } finally {
      await page.close();
    }
  }, 90_000);
});
