/**
 * The text of one member of a JSON object, exactly as written: the webhook's `data` is sealed and
 * handed back as Composio wrote it, key order, spacing and numbers (`1.50`, 30-digit integers)
 * included. `text` is valid JSON (the delivery was parsed before); its top level is an object.
 * With the key given twice, the last one counts, as in `JSON.parse` and `jsonb`. Undefined when
 * the object has no such member.
 */
export function jsonMemberText(text: string, key: string): string | undefined {
  let at = skipSpace(text, 0);
  if (text[at] !== '{') return undefined;
  at = skipSpace(text, at + 1);
  let found: string | undefined;
  while (text[at] !== '}') {
    const keyEnd = stringEnd(text, at);
    const name = JSON.parse(text.slice(at, keyEnd)) as string;
    at = skipSpace(text, keyEnd);
    at = skipSpace(text, at + 1); // the colon
    const valueEnd = valueEndAt(text, at);
    if (name === key) found = text.slice(at, valueEnd);
    at = skipSpace(text, valueEnd);
    if (text[at] === ',') at = skipSpace(text, at + 1);
  }
  return found;
}

function skipSpace(text: string, at: number): number {
  while (at < text.length && (text[at] === ' ' || text[at] === '\t' || text[at] === '\n' || text[at] === '\r')) at++;
  return at;
}

/** Where the string starting at `at` (its opening quote) ends: just after its closing quote. */
function stringEnd(text: string, at: number): number {
  for (let i = at + 1; i < text.length; i++) {
    if (text[i] === '\\') i++;
    else if (text[i] === '"') return i + 1;
  }
  throw new Error('unterminated string');
}

/** Where the value starting at `at` ends. Nested objects and arrays are skipped by their brackets, strings whole. */
function valueEndAt(text: string, at: number): number {
  const first = text[at];
  if (first === '"') return stringEnd(text, at);
  if (first === '{' || first === '[') {
    let depth = 0;
    for (let i = at; i < text.length; i++) {
      const ch = text[i];
      if (ch === '"') i = stringEnd(text, i) - 1;
      else if (ch === '{' || ch === '[') depth++;
      else if (ch === '}' || ch === ']') {
        depth--;
        if (depth === 0) return i + 1;
      }
    }
    throw new Error('unterminated value');
  }
  // A number, true, false or null: up to the next delimiter.
  let i = at;
  while (i < text.length && !',}] \t\n\r'.includes(text[i]!)) i++;
  return i;
}
