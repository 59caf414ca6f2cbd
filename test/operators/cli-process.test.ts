import { describe, expect, it } from 'vitest';
import { spawnCli } from './support.js';

/** Every other CLI test runs it in-process; this one runs `npm run cli`'s entry as operators do. */
describe('the CLI in its own process', () => {
  it('prints to stdout, reads the process environment, and exits with the command’s code', async () => {
    const [printed, misconfigured] = await Promise.all([
      spawnCli(['keys', 'generate'], {}, { via: 'tsx' }),
      spawnCli(['migrate'], { DATABASE_URL: 'mysql://nope' }, { via: 'tsx' }),
    ]);
    expect(printed.code).toBe(0);
    expect(printed.stdout).toMatch(/# Public JWKS\. Set it as OPERATOR_PUBLIC_KEYS/);
    expect(misconfigured.code).toBe(1);
    expect(misconfigured.stderr).toBe('omb-cli migrate: invalid configuration: DATABASE_URL: must be a postgres:// URL\n');
  });
});
