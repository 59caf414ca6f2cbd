/**
 * Whether an incoming event passes its trigger's filter.
 *
 * Gmail filters become the trigger's Gmail search query, so Gmail itself drops other mail and
 * everything that arrives already matches. For other apps each filter key is a dot path into the
 * event's data (`sender.login`, `items.0.name`), and the value found there must contain the
 * filter text, ignoring case. Every key must match; an empty filter matches everything.
 */
export function matchesFilter(toolkit: string, filter: Record<string, string>, data: unknown): boolean {
  if (toolkit.toLowerCase() === 'gmail') return true;
  return Object.entries(filter).every(([path, wanted]) => containsText(valueAt(data, path), wanted.toLowerCase()));
}

const MISSING = Symbol('missing');

function valueAt(data: unknown, path: string): unknown {
  let current: unknown = data;
  for (const segment of path.split('.')) {
    if (current === null || typeof current !== 'object') return MISSING;
    // Own properties only: a path such as `__proto__.x` or `constructor` must not reach the prototype.
    if (!Object.hasOwn(current, segment)) return MISSING;
    current = (current as Record<string, unknown>)[segment];
  }
  return current;
}

/** Text, numbers and booleans compare as text; a list matches when any of its items does. */
function containsText(value: unknown, wantedLower: string): boolean {
  if (typeof value === 'string') return value.toLowerCase().includes(wantedLower);
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') {
    return String(value).toLowerCase().includes(wantedLower);
  }
  if (Array.isArray(value)) return value.some((item) => containsText(item, wantedLower));
  return false;
}
