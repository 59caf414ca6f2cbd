import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { Sql } from '../db/database.js';
import type { DataKeys } from './keys.js';

/**
 * A value encrypted at rest: AES-256-GCM (node:crypto) under one of the data keys, with a fresh
 * 12-byte IV per value, and bound to where it is stored by the additional data (`bound`: what
 * names its row, such as the installation and the event). The same bytes in another row, or read
 * with another key, do not decrypt: `open` throws.
 *
 * Layout: `0x01` (this layout), the key id's length (1 byte), the key id (ASCII), the IV (12 bytes),
 * the ciphertext, the tag (16 bytes). The key id is in clear, so that what a key protects can be
 * counted (`data-keys status`) and a missing key named.
 */

const LAYOUT = 0x01;
const IV_BYTES = 12;
const TAG_BYTES = 16;
/**
 * IVs are drawn from the CSPRNG this many at a time: one `randomBytes` call costs microseconds
 * whatever its size, as much as sealing a kilobyte. Each IV is handed out once, from a buffer
 * never written again.
 */
const IVS_PER_DRAW = 256;
let drawn = Buffer.alloc(0);
let nextIv = 0;

/** A fresh 12-byte IV (random, never handed out before). */
export function freshIv(): Buffer {
  if (nextIv + IV_BYTES > drawn.length) {
    drawn = randomBytes(IV_BYTES * IVS_PER_DRAW);
    nextIv = 0;
  }
  const iv = drawn.subarray(nextIv, nextIv + IV_BYTES);
  nextIv += IV_BYTES;
  return iv;
}

export class SealError extends Error {
  override name = 'SealError';
}

/** `plaintext` as bytes, or text sealed as UTF-8 (without copying it into bytes first). */
export function seal(keys: DataKeys, plaintext: Buffer | string, bound: string): Buffer {
  const { id, key } = keys.current;
  const iv = freshIv();
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(bound, 'utf8'));
  const body = typeof plaintext === 'string' ? cipher.update(plaintext, 'utf8') : cipher.update(plaintext);
  // GCM is a stream mode: `final` adds no bytes, it only makes the tag.
  cipher.final();
  return Buffer.concat([headerOf(id), iv, body, cipher.getAuthTag()]);
}

const headers = new Map<string, Buffer>();
/** The layout byte, the key id's length and the key id: the same for every value sealed under the key. */
function headerOf(id: string): Buffer {
  let header = headers.get(id);
  if (!header) {
    header = Buffer.concat([Buffer.from([LAYOUT, id.length]), Buffer.from(id, 'ascii')]);
    headers.set(id, header);
  }
  return header;
}

/** The id of the key a sealed value is under; SealError for bytes that are not a sealed value. */
export function sealedKeyId(sealed: Buffer): string {
  if (sealed.length < 2 || sealed[0] !== LAYOUT) throw new SealError('not a sealed value of a known layout');
  const length = sealed[1]!;
  if (sealed.length < 2 + length + IV_BYTES + TAG_BYTES) throw new SealError('a sealed value cut short');
  return sealed.subarray(2, 2 + length).toString('ascii');
}

/** The plaintext, or SealError: a key not configured, or bytes not sealed for `bound` with that key. */
export function open(keys: DataKeys, sealed: Buffer, bound: string): Buffer {
  const id = sealedKeyId(sealed);
  const key = keys.byId.get(id);
  if (!key) throw new SealError(`sealed under the key ${id}, which is not configured`);
  const at = 2 + id.length;
  const iv = sealed.subarray(at, at + IV_BYTES);
  const body = sealed.subarray(at + IV_BYTES, sealed.length - TAG_BYTES);
  const decipher = createDecipheriv('aes-256-gcm', key.key, iv);
  decipher.setAAD(Buffer.from(bound, 'utf8'));
  decipher.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES));
  try {
    return Buffer.concat([decipher.update(body), decipher.final()]);
  } catch {
    throw new SealError(`does not decrypt under the key ${id} for where it is stored`);
  }
}

/**
 * `sealedKeyId` in SQL, a fragment of a larger statement: the key id (text) the sealed value in
 * `column` (`sealed`, `e.sealed`) is under, null for null. For counting and comparing in Postgres.
 */
export function sealedKeyIdSql(sql: Sql, column: string) {
  return sql`convert_from(substring(${sql(column)} from 3 for get_byte(${sql(column)}, 1)), 'SQL_ASCII')`;
}
