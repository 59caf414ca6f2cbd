import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { CONFIGURATION_REFERENCE, configurationReference } from '../scripts/docs.js';
import { EnvSchema } from './config.js';

describe('docs/configuration.md', () => {
  it('is what `npm run docs` writes from the schema now', async () => {
    const written = await readFile(CONFIGURATION_REFERENCE, 'utf8').catch(() => '(missing)');
    expect(written, 'docs/configuration.md differs from the schema in src/config.ts: run `npm run docs`').toBe(configurationReference());
  });

  it('has a row for every variable the broker reads', () => {
    const reference = configurationReference();
    for (const name of Object.keys(EnvSchema.shape)) expect(reference).toContain(`| \`${name}\` |`);
  });
});
