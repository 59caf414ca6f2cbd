import { mkdir, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { EnvSchema } from '../src/config.js';

/**
 * `npm run docs`: writes docs/configuration.md from the environment schema in src/config.ts, so
 * the reference cannot drift from what the broker accepts. Each row is read from the schema
 * itself: the description from `.describe()`, the default from `.default()`, the allowed values
 * from the enum, the number's bounds or the refinements' messages.
 */

export const CONFIGURATION_REFERENCE = new URL('../docs/configuration.md', import.meta.url);

/** What a variable's schema allows, as a reader would say it; undefined when any text will do. */
function allowedValues(schema: z.ZodType): string | undefined {
  if (schema instanceof z.ZodDefault || schema instanceof z.ZodOptional) return allowedValues(schema.unwrap() as z.ZodType);
  // A pipe's later stage is the stricter (the text is trimmed first, then read as a URL or a flag).
  if (schema instanceof z.ZodPipe) return allowedValues(schema.out as z.ZodType) ?? allowedValues(schema.in as z.ZodType);
  if (schema instanceof z.ZodEnum) return schema.options.map((option) => code(String(option))).join(', ');
  if (schema instanceof z.ZodNumber) {
    const kind = schema.isInt ? 'integer' : 'number';
    if (schema.minValue !== null && schema.maxValue !== null) return `${kind}, ${count(schema.minValue)}–${count(schema.maxValue)}`;
    if (schema.minValue !== null) return `${kind}, at least ${count(schema.minValue)}`;
    if (schema.maxValue !== null) return `${kind}, at most ${count(schema.maxValue)}`;
    return kind;
  }
  if (schema instanceof z.ZodString) {
    const refinements = refinementMessages(schema).map((message) => message.replace(/^must be /, ''));
    if (refinements.length > 0) return refinements.join('; ');
    if (schema.minLength !== null && schema.minLength > 0) return 'non-empty';
  }
  return undefined;
}

/** The messages of a schema's `.refine()` checks, which say what a value must be. */
function refinementMessages(schema: z.ZodType): string[] {
  const messages: string[] = [];
  for (const check of schema.def.checks ?? []) {
    if (check._zod.def.check !== 'custom') continue;
    // A refinement given a message keeps it as an error map that ignores the issue.
    const message = check._zod.def.error?.(undefined as never);
    if (typeof message === 'string') messages.push(message);
  }
  return messages;
}

/** The value an unset variable takes: a `.default()` outermost or at the start of a pipe (before its transform). */
function defaultValue(schema: z.ZodType): unknown {
  if (schema instanceof z.ZodDefault) return schema.def.defaultValue;
  if (schema instanceof z.ZodPipe) return defaultValue(schema.in as z.ZodType);
  return undefined;
}

const code = (text: string) => `\`${text}\``;
const count = (n: number) => n.toLocaleString('en-US');
const cell = (text: string) => text.replaceAll('|', '\\|').replaceAll('\n', ' ');

/** The text of docs/configuration.md as the schema stands now. */
export function configurationReference(): string {
  const rows = Object.entries(EnvSchema.shape).map(([name, schema]) => {
    const description = schema.description;
    if (!description) throw new Error(`${name} in src/config.ts has no .describe(): every variable needs one for docs/configuration.md`);
    const fallback = defaultValue(schema);
    return `| ${code(name)} | ${fallback === undefined ? 'unset' : code(String(fallback))} | ${cell(allowedValues(schema) ?? '')} | ${cell(description)} |`;
  });
  return [
    '# Configuration',
    '',
    '<!-- Written by `npm run docs` from the schema in src/config.ts (EnvSchema): change the schema, then run it. -->',
    '',
    'Everything is read from the environment once at start and validated; a wrong value stops the',
    'broker with a message naming the variable. A number is written in decimal digits: an empty one',
    '(`PORT=` in an env file) is refused, never read as 0. What production sets is in',
    '[Operating the broker](operating.md#configuration-for-production).',
    '',
    '| variable | default | allowed | meaning |',
    '| --- | --- | --- | --- |',
    ...rows,
    '',
  ].join('\n');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  await mkdir(new URL('.', CONFIGURATION_REFERENCE), { recursive: true });
  await writeFile(CONFIGURATION_REFERENCE, configurationReference());
  console.log(`wrote ${fileURLToPath(CONFIGURATION_REFERENCE)}`);
}
