import { readFile } from 'node:fs/promises';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { buildTestApp, type TestApp } from '../support/app.js';
import { launchChromium } from '../support/chromium.js';

let t: TestApp;
let browser: Browser;
let origin: string;

beforeAll(async () => {
  t = await buildTestApp();
  origin = await t.app.listen({ port: 0, host: '127.0.0.1' });
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  await t.close();
});

describe('/docs in a browser', () => {
  it('loads from the broker alone and lists every route of openapi.yaml', async () => {
    const spec = parse(await readFile(new URL('../../openapi.yaml', import.meta.url), 'utf8')) as {
      paths: Record<string, Record<string, unknown>>;
    };
    const expected = Object.entries(spec.paths).flatMap(([path, item]) =>
      ['get', 'post', 'put', 'patch', 'delete'].filter((m) => item[m]).map((m) => `${m.toUpperCase()} ${path}`),
    );

    const page = await browser.newPage();
    const elsewhere: string[] = [];
    page.on('request', (request) => {
      if (!request.url().startsWith(`${origin}/`) && !request.url().startsWith('data:')) elsewhere.push(request.url());
    });
    const response = await page.goto(`${origin}/docs`);
    expect(response?.status()).toBe(200);
    expect(await page.title()).toContain('API reference');

    // Swagger UI renders one block per operation once it has read the document.
    const operations = page.locator('.opblock');
    await expect.poll(() => operations.count(), { timeout: 15_000 }).toBe(expected.length);
    const listed = await operations.evaluateAll((blocks) =>
      blocks.map((block) => {
        const method = block.querySelector('.opblock-summary-method')?.textContent?.trim() ?? '';
        const path = block.querySelector('.opblock-summary-path')?.getAttribute('data-path') ?? '';
        return `${method} ${path}`;
      }),
    );
    expect(listed.sort()).toEqual(expected.sort());
    const me = page.locator('.opblock', { has: page.locator('.opblock-summary-path[data-path="/v1/me"]') }).first();
    await expect(me.locator('.opblock-summary-description').textContent()).resolves.toContain('Check in');
    expect(elsewhere, 'requests that left the broker').toEqual([]);
    await page.close();
  });
});
