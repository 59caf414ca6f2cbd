import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { nginxTest, SHIPPED_NGINX_CONF } from '../support/nginx.js';

/**
 * docker/nginx.conf as Debian's nginx reads it. In the `system` project (`npm run test:system`)
 * because it needs the `nginx` package; without it this fails, saying what to install. The
 * checks of the same file as text are in compose.test.ts.
 */

describe('docker/nginx.conf', () => {
  it('passes `nginx -t` (Debian’s nginx) as shipped', async () => {
    const verdict = await nginxTest(await readFile(SHIPPED_NGINX_CONF, 'utf8'));
    expect(verdict.output).toMatch(/syntax is ok/);
    expect(verdict.ok, verdict.output).toBe(true);
  });
});
