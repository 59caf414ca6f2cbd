import { randomBytes, randomUUID } from 'node:crypto';

const ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ';

/** A Composio-style nano id such as `ca_9sK2mQ7dLx1B` (prefix + base62). */
export function nanoId(prefix: string, length = 12): string {
  const bytes = randomBytes(length);
  let id = '';
  // 62 does not divide 256; the slight bias is irrelevant for simulated ids.
  for (const byte of bytes) id += ALPHABET[byte % ALPHABET.length];
  return `${prefix}_${id}`;
}

export const uuid = (): string => randomUUID();

const WORDS_A = ['amber', 'brisk', 'coup', 'dusky', 'eager', 'fable', 'gusty', 'hazel', 'ivory', 'jolly'];
const WORDS_B = ['hurricane', 'otter', 'meadow', 'lantern', 'harbor', 'falcon', 'willow', 'summit', 'canyon', 'ember'];

/** Composio's human-readable `word_id` for a connected account. */
export function wordId(): string {
  const [a, b] = randomBytes(2);
  return `${WORDS_A[(a ?? 0) % WORDS_A.length]}_${WORDS_B[(b ?? 0) % WORDS_B.length]}`;
}

/** A webhook signing secret. Composio's format is unconfirmed; the HMAC key is the raw string either way. */
export function webhookSecret(): string {
  return randomBytes(32).toString('base64url');
}
