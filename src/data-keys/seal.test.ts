import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { type DataKeys, parseDataKeys } from './keys.js';
import { freshIv, open, SealError, seal, sealedKeyId } from './seal.js';

function keys(text: string): DataKeys {
  const parsed = parseDataKeys(text, 'test');
  if ('problems' in parsed) throw new Error(parsed.problems.join('; '));
  return parsed.keys;
}

const A = `a:${randomBytes(32).toString('base64')}`;
const B = `b:${randomBytes(32).toString('base64url')}`;

describe('sealed values', () => {
  it('open to what was sealed, under the key that sealed them', () => {
    const both = keys(`${A},${B}`);
    const sealed = seal(both, Buffer.from('{"subject":"Hello"}'), 'event|i1|e1');
    expect(sealedKeyId(sealed)).toBe('a');
    expect(open(both, sealed, 'event|i1|e1').toString()).toBe('{"subject":"Hello"}');
    // Rotated: b encrypts now, a still decrypts.
    expect(open(keys(`${B},${A}`), sealed, 'event|i1|e1').toString()).toBe('{"subject":"Hello"}');
  });

  it('seal text as its UTF-8 bytes', () => {
    const k = keys(A);
    const text = '{"subject":"Grüße \u2603","n":1.50}';
    expect(open(k, seal(k, text, 'event|i1|e1'), 'event|i1|e1').equals(Buffer.from(text, 'utf8'))).toBe(true);
  });

  it('never hold the plaintext, and differ each time (a fresh IV)', () => {
    const k = keys(A);
    const one = seal(k, Buffer.from('marker-1234567890'), 'x');
    const two = seal(k, Buffer.from('marker-1234567890'), 'x');
    expect(one.includes(Buffer.from('marker'))).toBe(false);
    expect(one.equals(two)).toBe(false);
  });

  it('each take an IV of their own, across the draws from the CSPRNG', () => {
    const ivs = Array.from({ length: 2000 }, () => freshIv());
    expect(ivs.every((iv) => iv.length === 12)).toBe(true);
    expect(new Set(ivs.map((iv) => iv.toString('hex'))).size).toBe(ivs.length);
    // Handed-out IVs are never written again: the first still reads as it did.
    const first = Buffer.from(ivs[0]!);
    for (let i = 0; i < 1000; i++) freshIv();
    expect(ivs[0]!.equals(first)).toBe(true);
  });

  it('do not open for another row, another key, or once changed', () => {
    const k = keys(A);
    const sealed = seal(k, Buffer.from('data'), 'event|installation-1|e1');
    expect(() => open(k, sealed, 'event|installation-2|e1')).toThrow(SealError);
    expect(() => open(keys(`a:${randomBytes(32).toString('base64')}`), sealed, 'event|installation-1|e1')).toThrow(SealError);
    const changed = Buffer.from(sealed);
    changed[changed.length - 20]! ^= 1;
    expect(() => open(k, changed, 'event|installation-1|e1')).toThrow(SealError);
    expect(() => open(keys(B), sealed, 'event|installation-1|e1')).toThrow(/the key a, which is not configured/);
    expect(() => open(k, Buffer.from([7, 1, 2]), 'x')).toThrow(SealError);
  });
});
