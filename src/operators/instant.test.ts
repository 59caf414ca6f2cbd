import { describe, expect, it } from 'vitest';
import { readInstant } from './instant.js';

describe('an instant an operator gives', () => {
  it('is an ISO 8601 date (midnight UTC) or a date and time with its offset', () => {
    expect(readInstant('2026-12-01')?.toISOString()).toBe('2026-12-01T00:00:00.000Z');
    expect(readInstant('2026-12-01T09:30Z')?.toISOString()).toBe('2026-12-01T09:30:00.000Z');
    expect(readInstant('2026-12-01T09:30:15.250Z')?.toISOString()).toBe('2026-12-01T09:30:15.250Z');
    expect(readInstant('2026-12-01T09:30:00+01:00')?.toISOString()).toBe('2026-12-01T08:30:00.000Z');
    expect(readInstant('2026-12-01T00:30:00-02:30')?.toISOString()).toBe('2026-12-01T03:00:00.000Z');
    expect(readInstant('2028-02-29')?.toISOString()).toBe('2028-02-29T00:00:00.000Z');
  });

  it.each([
    ['1'],
    ['2026'],
    ['Dec 6'],
    ['12/06/2026'],
    ['yesterday'],
    [''],
    ['2026-02-30'],
    ['2027-02-29'],
    ['2026-13-01'],
    ['2026-12-01T24:00:00Z'],
    ['2026-12-01T09:60:00Z'],
    ['2026-12-01T09:30:00'],
    ['2026-12-01 09:30:00Z'],
    ['2026-12-01T09:30:00+24:00'],
    [' 2026-12-01'],
  ])('is not %j', (text) => {
    expect(readInstant(text)).toBeUndefined();
  });
});
