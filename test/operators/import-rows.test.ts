import { describe, expect, it } from 'vitest';
import { CsvSyntaxError, parseCsv } from '../../src/operators/import/csv.js';
import { readExportedRecords } from '../../src/operators/import/records.js';
import { checkRows } from '../../src/operators/import/rows.js';

const NOW = new Date('2026-01-01T00:00:00Z');
const ID = '0b6f2a2e-51f4-4c1e-9d6b-2f8e7c1a9b10';
const row = (overrides: Record<string, unknown> = {}) => ({
  id: ID,
  token_hash: 'a'.repeat(64),
  composio_user_id: `omb_${ID.replaceAll('-', '')}`,
  created_at: '2025-04-01T09:30:00Z',
  ...overrides,
});
const check = (values: Record<string, unknown>) => checkRows([{ where: 'entry 1', values }], NOW);

describe('parseCsv', () => {
  it('reads quoted fields with commas, doubled quotes and line breaks, and numbers records by their first line', () => {
    const records = parseCsv('\uFEFFa,b\r\n"x, y","say ""hi"""\n"two\nlines",z\n\nlast,row');
    expect(records).toEqual([
      { line: 1, fields: ['a', 'b'] },
      { line: 2, fields: ['x, y', 'say "hi"'] },
      { line: 3, fields: ['two\nlines', 'z'] },
      { line: 6, fields: ['last', 'row'] },
    ]);
  });

  it('keeps empty fields', () => {
    expect(parseCsv('a,,c\n')).toEqual([{ line: 1, fields: ['a', '', 'c'] }]);
  });

  it.each([
    ['"open', /line 1: a quoted field is never closed/],
    ['a,b\nx"y,z', /line 2: a quote inside an unquoted field/],
    ['"a"b,c', /line 1: text after a closing quote/],
  ])('refuses %j', (text, message) => {
    expect(() => parseCsv(text)).toThrow(CsvSyntaxError);
    expect(() => parseCsv(text)).toThrow(message);
  });
});

describe('checkRows', () => {
  it.each([
    ['2025-04-01T09:30:00Z', '2025-04-01T09:30:00.000Z'],
    ['2025-04-01 09:30:00', '2025-04-01T09:30:00.000Z'],
    ['2025-04-01 11:30:00+02', '2025-04-01T09:30:00.000Z'],
    ['2025-04-01T11:30:00+0200', '2025-04-01T09:30:00.000Z'],
    ['2025-04-01 09:30:00.123456+00', '2025-04-01T09:30:00.123Z'],
    ['2025-04-01T09:30', '2025-04-01T09:30:00.000Z'],
    [1_743_499_800, '2025-04-01T09:30:00.000Z'],
    ['1743499800000', '2025-04-01T09:30:00.000Z'],
  ])('reads the time %j', (createdAt, expected) => {
    const { valid, invalid } = check(row({ created_at: createdAt }));
    expect(invalid).toEqual([]);
    expect(valid[0]!.row.createdAt.toISOString()).toBe(expected);
    expect(valid[0]!.row.lastSeenAt.toISOString()).toBe(expected);
  });

  it.each([
    ['created_at', 'April 1st', /created_at must be a date/],
    ['created_at', null, /created_at is required/],
    ['created_at', '1970-01-01T00:00:00Z', /created_at must be a date/],
    ['created_at', '2030-01-01T00:00:00Z', /created_at must be a date/],
    ['disabled_at', true, /disabled_at must be a date/],
    ['id', ID.toUpperCase().replace('-', ''), /id must be a UUID/],
    ['token_hash', 'g'.repeat(64), /token_hash must be a SHA-256/],
    ['composio_user_id', undefined, /composio_user_id must be omb_/],
    ['session_id', 'has spaces in it', /session_id must be/],
  ])('refuses %s = %j', (column, value, message) => {
    const { valid, invalid } = check(row({ [column]: value }));
    expect(valid).toEqual([]);
    expect(invalid).toEqual([{ where: 'entry 1', problem: expect.stringMatching(message) }]);
  });

  it('normalises case: an uppercase id or hash is the same installation', () => {
    const { valid } = check(row({ id: ID.toUpperCase(), token_hash: 'A'.repeat(64) }));
    expect(valid[0]!.row).toMatchObject({ id: ID, tokenHash: 'a'.repeat(64), sessionId: null, disabledAt: null });
  });

  it('reads CSV blanks as absent values', () => {
    const records = readExportedRecords(
      `id,token_hash,composio_user_id,session_id,created_at,last_seen_at,disabled_at\n${ID},${'b'.repeat(64)},omb_${ID.replaceAll('-', '')},,2025-04-01 09:30:00,,\n`,
      'csv',
    );
    const { valid } = checkRows(records, NOW);
    expect(valid[0]!.row).toMatchObject({ sessionId: null, disabledAt: null });
  });
});
