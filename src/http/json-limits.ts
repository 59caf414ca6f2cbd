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

/** `text` with what Postgres cannot store (NUL, unpaired surrogates) replaced by U+FFFD. */
export function storableText(text: string): string {
  return isStorableText(text) ? text : text.replaceAll('\u0000', '\uFFFD').replace(new RegExp(LONE_SURROGATE.source, 'g'), '\uFFFD');
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
