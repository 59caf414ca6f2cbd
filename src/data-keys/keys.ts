import { createSecretKey, type KeyObject, randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/**
 * The keys that encrypt what the broker stores of people's data and of its secrets (see
 * seal.ts): `DATA_ENCRYPTION_KEYS`, or, where that is not required, a key file in `DATA_DIR`.
 * The first key encrypts new values; every key decrypts. A key's bytes never leave this module
 * and seal.ts: no log line, error, metric or answer holds one (only its id).
 */

/** A key's id as it is written into every value it encrypts. */
const KEY_ID = /^[a-z0-9_-]{1,32}$/;
const KEY_BYTES = 32;

interface DataKey {
  readonly id: string;
  /**
   * 32 bytes, AES-256, imported once: a cipher made from it skips importing the bytes again,
   * and written out it shows its size, never its bytes.
   */
  readonly key: KeyObject;
}

export interface DataKeys {
  /** The key new values are encrypted under. */
  readonly current: DataKey;
  /** Every configured key by its id, the current one included. */
  readonly byId: ReadonlyMap<string, DataKey>;
  /** Where they came from, for the start's log line: the setting or the key file's path. */
  readonly source: string;
}

/** The ids alone, in order, the current one first: what may be said of a set of keys. */
export function keyIds(keys: DataKeys): string[] {
  return [...keys.byId.keys()];
}

/** A key's text, base64 or base64url (padding optional), as exactly 32 bytes; undefined otherwise. */
function keyBytes(text: string): Buffer | undefined {
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(text)) return undefined;
  const bytes = Buffer.from(text.replaceAll('-', '+').replaceAll('_', '/'), 'base64');
  return bytes.length === KEY_BYTES ? bytes : undefined;
}

/**
 * `id:key,id:key…` read into keys, or the problems with it. A problem names the entry by its
 * place and its id, never by what its key holds.
 */
export function parseDataKeys(text: string, source: string): { keys: DataKeys } | { problems: string[] } {
  const problems: string[] = [];
  const byId = new Map<string, DataKey>();
  const entries = text
    .split(/[,\n]/)
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '');
  if (entries.length === 0) return { problems: ['holds no key'] };
  for (const [index, entry] of entries.entries()) {
    const problem = entryProblem(entry, index, byId);
    if (problem) problems.push(problem);
  }
  if (problems.length > 0) return { problems };
  const keys: DataKeys = { current: byId.values().next().value!, byId, source };
  // Written out, the keys are their ids and where they came from.
  Object.defineProperty(keys, 'toJSON', { value: () => ({ ids: [...byId.keys()], source }) });
  return { keys };
}

/** What is wrong with one `id:key` entry (its place counted from 0), or, when nothing is, undefined: the key is added to `byId`. */
function entryProblem(entry: string, index: number, byId: Map<string, DataKey>): string | undefined {
  const at = entry.indexOf(':');
  const id = at === -1 ? '' : entry.slice(0, at);
  const place = `entry ${index + 1}${KEY_ID.test(id) ? ` (${id})` : ''}`;
  if (at === -1) return `${place} is not id:key`;
  if (!KEY_ID.test(id)) return `${place}: its id must be 1 to 32 of a-z, 0-9, _ and -`;
  if (byId.has(id)) return `${place}: the id ${id} is given twice`;
  const key = keyBytes(entry.slice(at + 1).trim());
  if (!key) return `${place}: its key must be 32 bytes in base64 or base64url (\`openssl rand -base64 32\`)`;
  // Written out (a log line, JSON), a key is its id alone.
  byId.set(id, { id, key: createSecretKey(key), toJSON: () => ({ id }) } as DataKey);
  return undefined;
}

/** The key file's name in DATA_DIR. */
export const KEY_FILE = 'data-keys';

/**
 * The key file in `dataDir`, made at the first start with one new key (mode 0600): for the
 * embedded default and development, where no `DATA_ENCRYPTION_KEYS` is required. `created` says
 * whether this call made it. Its text is `DATA_ENCRYPTION_KEYS`'s, one key a line, so keys can be
 * added in front of the one it holds to rotate.
 */
export function keyFile(dataDir: string): { keys: DataKeys; created: boolean } {
  const file = path.join(path.resolve(dataDir), KEY_FILE);
  let created = false;
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
    const line = `local-${randomBytes(4).toString('hex')}:${randomBytes(KEY_BYTES).toString('base64url')}\n`;
    try {
      // Made whole or not at all: another process starting on the folder may make it first.
      writeFileSync(file, line, { mode: 0o600, flag: 'wx' });
      created = true;
    } catch (raced) {
      if ((raced as NodeJS.ErrnoException).code !== 'EEXIST') throw raced;
    }
    text = readFileSync(file, 'utf8');
  }
  const parsed = parseDataKeys(text, file);
  if ('problems' in parsed) throw new Error(`the data key file ${file}: ${parsed.problems.join('; ')}`);
  return { keys: parsed.keys, created };
}
