import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { decodeCursor, encodeCursor } from '../../../src/events/queue/cursor.js';

describe('cursors', () => {
  const installation = randomUUID();

  it('round-trip positions from 0 to the largest safe integer', () => {
    for (const position of [0, 1, 49, 2 ** 32 + 5, Number.MAX_SAFE_INTEGER]) {
      const cursor = encodeCursor(installation, position);
      expect(cursor).toMatch(/^[A-Za-z0-9_-]{22}$/);
      expect(decodeCursor(installation, cursor)).toBe(position);
    }
  });

  it('belong to one installation', () => {
    expect(() => decodeCursor(randomUUID(), encodeCursor(installation, 7))).toThrow(
      expect.objectContaining({ status: 400, code: 'invalid_cursor' }),
    );
  });

  it('refuse every other spelling, any changed character and garbage', () => {
    const cursor = encodeCursor(installation, 12);
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    for (let i = 0; i < cursor.length; i++) {
      for (const c of alphabet) {
        if (c === cursor[i]) continue;
        const changed = cursor.slice(0, i) + c + cursor.slice(i + 1);
        expect(() => decodeCursor(installation, changed), changed).toThrow();
      }
    }
    for (const bad of ['', 'x', `${cursor}=`, `${cursor}A`, cursor.slice(1), '12', ' '.repeat(22), '../../etc/passwd']) {
      expect(() => decodeCursor(installation, bad)).toThrow(expect.objectContaining({ code: 'invalid_cursor' }));
    }
  });
});
