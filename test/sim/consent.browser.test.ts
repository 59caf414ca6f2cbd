import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, linkToken, startHarness } from '../composio/harness.js';
import { launchChromium } from '../support/chromium.js';

/** The consent page in a real (headless) Chromium: a person clicks Authorize or Deny. */

let browser: Browser;
let h: Harness;

beforeAll(async () => {
  browser = await launchChromium();
  h = await startHarness();
});

afterAll(async () => {
  await browser?.close();
  await h?.close();
});

describe('consent page', () => {
  it('Authorize makes the pending account ACTIVE', async () => {
    const session = await h.gateway.createSession('omb_browser');
    const link = await h.gateway.createLink(session.sessionId, 'gmail', { alias: 'work' });
    const page = await browser.newPage();
    try {
      await page.goto(link.url);
      expect(await page.locator('h1').textContent()).toBe('Connect Gmail');
      expect(await page.locator('body').textContent()).toContain('work');
      expect((await h.gateway.findConnectedAccount('omb_browser', link.connectedAccountId))?.status).toBe('INITIATED');

      await page.getByRole('button', { name: 'Authorize' }).click();
      await page.locator('#result').waitFor();
      expect(await page.locator('#result').textContent()).toContain('ACTIVE');
      expect((await h.gateway.findConnectedAccount('omb_browser', link.connectedAccountId))?.status).toBe('ACTIVE');
    } finally {
      await page.close();
    }
  }, 60_000);

  it('Deny makes it FAILED', async () => {
    const session = await h.gateway.createSession('omb_browser_2');
    const link = await h.gateway.createLink(session.sessionId, 'slack', { alias: 'team' });
    const page = await browser.newPage();
    try {
      await page.goto(link.url);
      await page.getByRole('button', { name: 'Deny' }).click();
      await page.locator('#result').waitFor();
      expect(await page.locator('#result').textContent()).toContain('Access denied');
      expect((await h.gateway.findConnectedAccount('omb_browser_2', link.connectedAccountId))?.status).toBe('FAILED');
      expect(linkToken(link.url)).toMatch(/^ln_/);
    } finally {
      await page.close();
    }
  }, 60_000);
});
