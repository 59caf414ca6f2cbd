/**
 * A Gmail trigger's `query`, held against the mail a fired event stands for: Gmail itself leaves
 * out mail its search excludes, so the simulator must not deliver it either (a sandbox user firing
 * mail from anyone would otherwise never see a filter work).
 *
 * The operators understood are the ones the broker writes (src/triggers/gmail-query.ts):
 * `from:"…"`, `subject:"…"`, `label:name` and quoted or bare words; `from:` and `subject:` also
 * take a bare word. As in Gmail, terms side by side must all match, case does not matter, and a
 * phrase matches whole words in a row (`"invoice"` is not found in "invoices"). Any other
 * operator (`is:`, `after:`, `OR`, `-`, parentheses) is not understood here and matches nothing:
 * the simulator would rather deliver too little than show a filter letting mail through.
 *
 * What the mail holds is read from the event's data as Composio's Gmail payload names it:
 * `sender` (or `from`), `subject`, `to`, `message_text`, and its labels from `labelIds`,
 * `label_ids` or `payload.labelIds`.
 */

type Term =
  | { readonly kind: 'from' | 'subject' | 'words'; readonly words: string[] }
  | { readonly kind: 'label'; readonly name: string }
  | { readonly kind: 'unknown' };

/** Lower-case words of letters, digits and symbols, as Gmail tokenizes for search. */
function words(text: string): string[] {
  return text
    .normalize('NFC')
    .toLowerCase()
    .split(/[^\p{L}\p{N}\p{M}\p{So}]+/u)
    .filter((word) => word !== '');
}

/** Whether `phrase` appears in `haystack` as whole words in a row. */
function containsPhrase(haystack: string[], phrase: string[]): boolean {
  if (phrase.length === 0) return true;
  for (let start = 0; start + phrase.length <= haystack.length; start++) {
    if (phrase.every((word, i) => haystack[start + i] === word)) return true;
  }
  return false;
}

/** Splits a query into terms; a quoted phrase is one term, with or without an operator before it. */
function parseGmailQuery(query: string): Term[] {
  const terms: Term[] = [];
  const pattern = /(?:([A-Za-z]+):)?(?:"([^"]*)"|(\S+))/g;
  for (const match of query.matchAll(pattern)) {
    const [, operator, quoted, bare] = match;
    const value = quoted ?? bare ?? '';
    const op = operator?.toLowerCase();
    if (op === undefined) {
      // Gmail's own words: none of them is written by the broker, so none is understood.
      if (quoted === undefined && /^(OR|AND|AROUND)$|^[-(){}]/.test(value)) terms.push({ kind: 'unknown' });
      else terms.push({ kind: 'words', words: words(value) });
    } else if (op === 'from' || op === 'subject') terms.push({ kind: op, words: words(value) });
    else if (op === 'label' && quoted === undefined) terms.push({ kind: 'label', name: labelForm(value) });
    else terms.push({ kind: 'unknown' });
  }
  return terms;
}

/** A label name as Gmail's search writes it: lower case, runs of anything else as one hyphen. */
function labelForm(name: string): string {
  return name
    .normalize('NFC')
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\p{M}\p{So}_.]+/gu, '-')
    .replace(/^-+|-+$/g, '');
}

const text = (value: unknown): string => (typeof value === 'string' ? value : '');

function labelsOf(data: Record<string, unknown>): string[] {
  const payload = data.payload;
  const nested = typeof payload === 'object' && payload !== null ? (payload as Record<string, unknown>).labelIds : undefined;
  for (const candidate of [data.labelIds, data.label_ids, nested]) {
    if (Array.isArray(candidate)) return candidate.filter((label): label is string => typeof label === 'string').map(labelForm);
  }
  return [];
}

/** Whether the mail in `data` is one the query finds. An empty query finds all mail. */
export function gmailQueryMatches(query: string, data: Record<string, unknown>): boolean {
  const sender = words(text(data.sender) || text(data.from));
  const subject = words(text(data.subject));
  const fields = [sender, subject, words(text(data.to)), words(text(data.message_text))];
  const labels = labelsOf(data);
  const matches = (term: Term): boolean => {
    if (term.kind === 'from') return containsPhrase(sender, term.words);
    if (term.kind === 'subject') return containsPhrase(subject, term.words);
    if (term.kind === 'words') return fields.some((field) => containsPhrase(field, term.words));
    if (term.kind === 'label') return labels.includes(term.name);
    return false;
  };
  return parseGmailQuery(query).every(matches);
}
