import { describe, expect, it } from 'vitest';
import { isDatabaseUnavailable } from './errors.js';

const failure = (code: string, message = 'failed') => Object.assign(new Error(message), { code });

describe('isDatabaseUnavailable', () => {
  it.each([
    ['ECONNREFUSED', 'Postgres refusing connections'],
    ['EPIPE', 'a write on a connection Postgres had just closed, as while it restarts'],
    ['EHOSTUNREACH', 'the database host unreachable'],
    ['EAI_AGAIN', 'the database host name not resolvable for now'],
    ['57P01', 'the server shutting down'],
    ['25006', 'a database that cannot write now'],
    ['08006', 'any connection failure (class 08)'],
  ])('%s: %s', (code) => {
    expect(isDatabaseUnavailable(failure(code))).toBe(true);
    // drizzle wraps the driver's error in its own, with the driver's as the cause.
    expect(isDatabaseUnavailable(Object.assign(new Error('Failed query'), { cause: failure(code) }))).toBe(true);
  });

  it.each([
    ['23505', 'a unique violation'],
    ['22P02', 'invalid input'],
    ['ENOENT', 'a missing file'],
  ])('not %s: %s', (code) => {
    expect(isDatabaseUnavailable(failure(code))).toBe(false);
  });
});
