import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { KEY_FILE, keyFile, keyIds, parseDataKeys } from './keys.js';

describe('DATA_ENCRYPTION_KEYS', () => {
  it('reads id:key pairs, base64 or base64url, the first encrypting', () => {
    const raw = randomBytes(32);
    const parsed = parseDataKeys(` new:${raw.toString('base64url')} , old_1:${randomBytes(32).toString('base64')}`, 'DATA_ENCRYPTION_KEYS');
    if ('problems' in parsed) throw new Error(parsed.problems.join());
    expect(parsed.keys.current.id).toBe('new');
    expect(parsed.keys.current.key.export().equals(raw)).toBe(true);
    expect(keyIds(parsed.keys)).toEqual(['new', 'old_1']);
    // Written out (a log line, an error's details), the keys are their ids.
    const written = JSON.stringify({ keys: parsed.keys, current: parsed.keys.current });
    expect(written).toBe('{"keys":{"ids":["new","old_1"],"source":"DATA_ENCRYPTION_KEYS"},"current":{"id":"new"}}');
  });

  it('names what is wrong by place and id, never by the key', () => {
    const secret = randomBytes(16).toString('base64');
    const parsed = parseDataKeys(
      `ok:${randomBytes(32).toString('base64')},short:${secret},Bad Id:${randomBytes(32).toString('base64')},ok:${randomBytes(32).toString('base64')},nocolon`,
      'x',
    );
    expect('problems' in parsed && parsed.problems).toEqual([
      'entry 2 (short): its key must be 32 bytes in base64 or base64url (`openssl rand -base64 32`)',
      'entry 3: its id must be 1 to 32 of a-z, 0-9, _ and -',
      'entry 4 (ok): the id ok is given twice',
      'entry 5 is not id:key',
    ]);
    expect(JSON.stringify(parsed)).not.toContain(secret);
    expect(parseDataKeys(' , ', 'x')).toEqual({ problems: ['holds no key'] });
  });
});

describe('the key file', () => {
  it('is made once, mode 0600, and read as it is afterwards', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'omb-keys-'));
    const first = keyFile(dir);
    expect(first.created).toBe(true);
    expect(statSync(path.join(dir, KEY_FILE)).mode & 0o777).toBe(0o600);
    const again = keyFile(dir);
    expect(again.created).toBe(false);
    expect(again.keys.current.id).toBe(first.keys.current.id);
    expect(again.keys.current.key.equals(first.keys.current.key)).toBe(true);
    expect(readFileSync(path.join(dir, KEY_FILE), 'utf8')).toMatch(/^local-[0-9a-f]{8}:[A-Za-z0-9_-]{43}\n$/);
  });

  it('refuses a damaged file, saying which', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'omb-keys-'));
    writeFileSync(path.join(dir, KEY_FILE), 'k:short\n');
    expect(() => keyFile(dir)).toThrow(`the data key file ${path.join(dir, KEY_FILE)}: entry 1 (k): its key must be 32 bytes`);
  });
});
