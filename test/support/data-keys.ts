import { type DataKeys, parseDataKeys } from '../../src/data-keys/keys.js';

/**
 * The data keys of the brokers the tests run (`DATA_ENCRYPTION_KEYS`): one fixed key, so that every
 * broker and CLI on a test's database reads what the others sealed, as a deployment's processes
 * share theirs. A test about the keys themselves sets its own.
 */
export const TEST_DATA_KEYS = `test:${Buffer.alloc(32, 7).toString('base64')}`;

export function testDataKeys(): DataKeys {
  return dataKeys(TEST_DATA_KEYS);
}

/** `DATA_ENCRYPTION_KEYS`' text as the broker reads it; throws on a text it refuses. */
export function dataKeys(text: string): DataKeys {
  const parsed = parseDataKeys(text, 'DATA_ENCRYPTION_KEYS');
  if ('problems' in parsed) throw new Error(parsed.problems.join('; '));
  return parsed.keys;
}
