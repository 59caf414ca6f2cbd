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
  it('loads and lists every route of openapi.yaml', async () => {
    const spec = parse(await readFile(new URL('../../openapi.yaml', import.meta.url), 'utf8')) as {
      paths: Record<string, Record<string, unknown>>;
    };
    const expected = Object.entries(spec.paths).flatMap(([path, item]) =>
      ['get', 'post', 'put', 'patch', 'delete'].filter((m) => item[m]).map((m) => `${m.toUpperCase()} ${path}`),
    );

    const page = await browser.newPage();
    const response = await page.goto(`${origin}/docs`);
    expect(response?.status()).toBe(200);
    expect(await page.title()).toContain('API reference');
    const listed = await page.locator('section.op').evaluateAll((sections) => sections.map((s) => s.getAttribute('data-route')));
    expect(listed.sort()).toEqual(expected.sort());
    await expect(page.locator('section.op[data-route="GET /v1/me"] h3').textContent()).resolves.toContain('/v1/me');
    await page.close();
  });
});
