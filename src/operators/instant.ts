/**
 * An ISO 8601 instant an operator gives (a filter of the admin API or the CLI): a date
 * (`2026-12-01`, midnight UTC), or a date and time with its offset (`2026-12-01T09:30:00Z`,
 * `…+01:00`, seconds and their fractions optional). Undefined for anything else: `Date.parse`
 * would read `1` as the year 2001, `Dec 6` as 6 December 2001 and `2026-02-30` as 2 March.
 */
export function readInstant(text: string): Date | undefined {
  const match = INSTANT.exec(text);
  if (!match) return undefined;
  const [, year, month, day, hour = '00', minute = '00', second = '00'] = match;
  const calendar = new Date(Date.UTC(Number(year), Number(month) - 1, Number(day)));
  const realDay =
    calendar.getUTCFullYear() === Number(year) && calendar.getUTCMonth() === Number(month) - 1 && calendar.getUTCDate() === Number(day);
  if (!realDay || Number(hour) > 23 || Number(minute) > 59 || Number(second) > 59) return undefined;
  const at = Date.parse(match[4] === undefined ? `${text}T00:00:00Z` : text);
  return Number.isNaN(at) ? undefined : new Date(at);
}

const INSTANT =
  /^([0-9]{4})-([0-9]{2})-([0-9]{2})(?:T([0-9]{2}):([0-9]{2})(?::([0-9]{2})(?:\.[0-9]{1,9})?)?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9]))?$/;

/** What a refused instant is told. */
export const INSTANT_RULE = 'must be an ISO 8601 date (2026-12-01) or date and time with its offset (2026-12-01T09:30:00Z)';
