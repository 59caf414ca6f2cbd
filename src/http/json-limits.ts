/**
 * What JSON the broker accepts beyond "it parses": nesting bounded before anything walks it
 * recursively, and strings that Postgres can store.
 */

/** The deepest nesting of objects and arrays accepted in any JSON body (the whole body counts). */
export const MAX_JSON_DEPTH = 64;

/**
 * Where JSON `text` nests deeper than `max`, found by one pass over the characters (no parsing,
 * no recursion): `{field}` names the top-level key under which it happened (undefined at the
 * top level), or the answer is undefined when the text stays within `max`. Text that is not
 * JSON is left for the parser to refuse.
 */
export function excessiveNesting(text: string, max = MAX_JSON_DEPTH): { field: string | undefined } | undefined {
  // Nothing nests deeper than the text has openers: most bodies are cleared by two native scans.
  if (openers(text, max + 1) <= max) return undefined;
  let depth = 0;
  let inString = false;
  let stringStart = 0;
  let lastTopString: string | undefined;
  let field: string | undefined;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: skip the escaped character
      else if (c === 0x22) {
        inString = false;
        if (depth === 1) lastTopString = text.slice(stringStart, i + 1);
      }
      continue;
    }
    if (c === 0x22) {
      inString = true;
      stringStart = i;
    } else if (c === 0x7b || c === 0x5b) {
      depth++;
      if (depth > max) return { field };
    } else if (c === 0x7d || c === 0x5d) {
      depth--;
      if (depth === 1) lastTopString = undefined;
    } else if (c === 0x3a && depth === 1 && lastTopString !== undefined) {
      field = readKey(lastTopString);
    }
  }
  return undefined;
}

/** How many `{` and `[` `text` holds (strings included), counted up to `limit`. */
function openers(text: string, limit: number): number {
  let count = 0;
  for (const opener of ['{', '[']) {
    for (let at = text.indexOf(opener); at !== -1; at = text.indexOf(opener, at + 1)) {
      if (++count >= limit) return count;
    }
  }
  return count;
}

function readKey(token: string): string | undefined {
  try {
    return JSON.parse(token) as string;
  } catch {
    return undefined;
  }
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Whether Postgres can store `text` in `text` and `jsonb` as it is: no NUL, no unpaired UTF-16 surrogate. */
export function isStorableText(text: string): boolean {
  return !text.includes('\u0000') && !LONE_SURROGATE.test(text);
}

/**
 * The path (`['a', '0', 'b']`) of the first key or string in `value` Postgres cannot store, or
 * undefined when it can store all of it. Walks with its own stack, not recursion.
 */
export function unstorablePath(value: unknown): string[] | undefined {
  const stack: { value: unknown; path: string[] }[] = [{ value, path: [] }];
  while (stack.length > 0) {
    const { value: current, path } = stack.pop()!;
    if (typeof current === 'string') {
      if (!isStorableText(current)) return path;
    } else if (Array.isArray(current)) {
      for (const [index, item] of current.entries()) stack.push({ value: item, path: [...path, String(index)] });
    } else if (current !== null && typeof current === 'object') {
      for (const [key, item] of Object.entries(current)) {
        if (!isStorableText(key)) return [...path, key];
        stack.push({ value: item, path: [...path, key] });
      }
    }
  }
  return undefined;
}

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/**
 * `bytes` as text when they are UTF-8, the only encoding JSON has (a byte-order mark is dropped),
 * or undefined when they are not: never turned into U+FFFD, which would store something the
 * sender never wrote (an account label of "���").
 */
export function utf8Text(bytes: Uint8Array): string | undefined {
  try {
    return UTF8.decode(bytes);
  } catch {
    return undefined;
  }
}

/**
 * Keys refused in every JSON body of the API: they name a JavaScript object's prototype and its
 * constructor, which code merging or copying objects would follow, and no field of the API is
 * called so.
 */
const FORBIDDEN_KEYS: ReadonlySet<string> = new Set(['__proto__', 'constructor']);
/** Text without these can hold no forbidden key (a key may be spelled with `\u` escapes). */
const MAY_HOLD_FORBIDDEN_KEY = /__proto__|constructor|\\u/;

/**
 * The path (`['config', '__proto__']`) of the first forbidden key in `value`, parsed from JSON
 * `text`, or undefined when it has none. Walks with its own stack, not recursion.
 */
export function forbiddenKeyPath(text: string, value: unknown): string[] | undefined {
  if (!MAY_HOLD_FORBIDDEN_KEY.test(text)) return undefined;
  const stack: { value: unknown; path: string[] }[] = [{ value, path: [] }];
  while (stack.length > 0) {
    const { value: current, path } = stack.pop()!;
    if (Array.isArray(current)) {
      for (const [index, item] of current.entries()) stack.push({ value: item, path: [...path, String(index)] });
    } else if (current !== null && typeof current === 'object') {
      // JSON.parse makes `__proto__` an own key like any other, so it is listed here.
      for (const [key, item] of Object.entries(current)) {
        if (FORBIDDEN_KEYS.has(key)) return [...path, key];
        stack.push({ value: item, path: [...path, key] });
      }
    }
  }
  return undefined;
}

/**
 * Each escape of valid JSON text, read left to right (so `\\u0000`, an escaped backslash and then
 * `u0000`, is no NUL): a surrogate pair, NUL or a lone surrogate, or any other one-character escape.
 */
const ESCAPES = /\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|\\u(?:0000|[dD][89a-fA-F][0-9a-fA-F]{2})|\\[^u]/g;
const MAY_HOLD_UNSTORABLE_ESCAPE = /\\u(?:0000|[dD][89a-fA-F])/;

/**
 * Valid JSON `text` as Postgres takes it as `jsonb`, which refuses the escapes `\u0000` and
 * unpaired surrogates (an e-mail subject cut mid-emoji): each becomes `\ufffd`, in the text
 * itself, so everything else stays exactly as written. (UTF-8 text can hold neither raw.)
 */
export function storableJsonText(text: string): string {
  if (!MAY_HOLD_UNSTORABLE_ESCAPE.test(text)) return text;
  // A pair (12 characters) and one-character escapes (2) stay; NUL and lone surrogates (6) go.
  return text.replace(ESCAPES, (sequence) => (sequence.length === 6 ? '\\ufffd' : sequence));
}

/**
 * Where valid JSON text may hold a number with an exponent (strings may match too: only a hint).
 * A JSON number starts the text or follows `[`, `:`, `,` or white space, which keeps ids such as
 * UUIDs (`…-4e5f…`) from making every delivery take the full walk.
 */
const MAY_HOLD_EXPONENT = /(?:^|[\s,:[])-?\d+(?:\.\d+)?[eE][+-]?\d/;
/** The most digits Postgres's `numeric` (which `jsonb` keeps numbers in) holds after the point; before it, 131072. */
const NUMERIC_SCALE_MAX = 16383;

/**
 * Whether valid JSON `text` may hold a number `jsonb` cannot hold (beyond `numeric`'s digits before
 * or after the point): only one written with an exponent or with more than 16383 digits can.
 * A hint, never a miss: text in strings may match too. Linear in the text's length.
 */
export function mayExceedNumeric(text: string): boolean {
  if (MAY_HOLD_EXPONENT.test(text)) return true;
  if (text.length <= NUMERIC_SCALE_MAX) return false;
  let digits = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    digits = c >= 0x30 && c <= 0x39 ? digits + 1 : 0;
    if (digits > NUMERIC_SCALE_MAX) return true;
  }
  return false;
}

/** A string, skipped whole, or a number with an exponent: its integer digits, fraction and exponent. */
const STRING_OR_EXPONENT = /"(?:[^"\\]+|\\.)*"|-?(\d+)(?:\.(\d+))?[eE]([+-]?\d+)/g;

/**
 * How long valid JSON `text` is once Postgres has written its numbers out (give or take the
 * spaces it puts after `:` and `,`): `jsonb` keeps a number's value and scale and prints it
 * without an exponent, so the 5 characters of `1e400` come back as 401 digits, and the 8 of
 * `1e131071` as 131072.
 */
export function writtenOutLength(text: string): number {
  if (!MAY_HOLD_EXPONENT.test(text)) return text.length;
  let length = text.length;
  for (const [token, whole, fraction = '', exponentText] of text.matchAll(STRING_OR_EXPONENT)) {
    if (whole === undefined) continue;
    const exponent = Number(exponentText);
    const before = Math.max(1, whole.length + exponent);
    const after = Math.max(0, fraction.length - exponent);
    length += (token.startsWith('-') ? 1 : 0) + before + (after > 0 ? 1 + after : 0) - token.length;
  }
  return length;
}
