/**
 * A Gmail trigger's `filter` as Gmail search syntax, sent to Composio as the trigger's `query`,
 * so Gmail itself drops other mail.
 *
 * The filter's values come from a person or an agent; none may widen the search. Gmail has no
 * escape character, so every value is made inert instead:
 * - control characters and line breaks become spaces, runs of whitespace one space, ends trimmed;
 * - double quotes (straight, typographic, full-width) and backslashes become spaces: a quote would
 *   end the phrase, and a backslash may be read as an escape by a layer between us and Gmail;
 * - `from` and `subject` become one quoted phrase (`subject:"re: invoice (march)"`), inside which
 *   `OR`, `AND`, `-`, `(`, `)`, `{`, `}` and `:` are plain text;
 * - `words` are split on spaces and each word is quoted on its own (`"invoice" "overdue"`): every
 *   word must appear, in any order, as in a plain Gmail search;
 * - `label` uses Gmail's own form for label names, where spaces and punctuation are hyphens
 *   (`Work/Clients (EU)` → `label:Work-Clients-EU`), so it needs no quotes;
 * - letters in any script, accents and emoji are kept (NFC-normalised).
 * A value left with no letter, digit or symbol (empty, spaces, punctuation only) would match all
 * mail, so `searchableText` reports it and the request is refused rather than the filter dropped.
 */

export const GMAIL_FILTER_KEYS = ['from', 'subject', 'label', 'words'] as const;
type GmailFilterKey = (typeof GMAIL_FILTER_KEYS)[number];
export type GmailFilter = Partial<Record<GmailFilterKey, string>>;

/** C0/C1 controls (tab, newline, NUL, DEL…) and the Unicode line and paragraph separators. */
const CONTROL = /[\p{Cc}\p{Zl}\p{Zp}]/gu;
/** Characters that could open or close a quoted phrase, and the backslash. */
const QUOTE_OR_ESCAPE = /["\\\u201C\u201D\u201E\u201F\u2033\u2036\uFF02]/g;
/** What Gmail indexes: letters, digits, combining marks and symbols such as emoji. */
const SEARCHABLE = /[\p{L}\p{N}\p{So}]/u;
/** Runs of anything Gmail writes as a hyphen in a label name. */
const LABEL_SEPARATORS = /[^\p{L}\p{N}\p{M}\p{So}_.]+/gu;

/** The value as Gmail may safely see it inside quotes; `''` when nothing searchable is left. */
export function searchableText(value: string): string {
  const text = value.normalize('NFC').replace(CONTROL, ' ').replace(QUOTE_OR_ESCAPE, ' ').replace(/\s+/gu, ' ').trim();
  return SEARCHABLE.test(text) ? text : '';
}

/** A label name in Gmail's search form, `''` when nothing searchable is left. */
export function labelTerm(value: string): string {
  const text = searchableText(value);
  return text.replace(LABEL_SEPARATORS, '-').replace(/^-+|-+$/g, '');
}

/** The Gmail search query for a filter; `''` for an empty filter. Keys come out in a fixed order. */
export function buildGmailQuery(filter: GmailFilter): string {
  const terms: string[] = [];
  const from = filter.from === undefined ? '' : searchableText(filter.from);
  if (from) terms.push(`from:${quoted(from)}`);
  const subject = filter.subject === undefined ? '' : searchableText(filter.subject);
  if (subject) terms.push(`subject:${quoted(subject)}`);
  const label = filter.label === undefined ? '' : labelTerm(filter.label);
  if (label) terms.push(`label:${label}`);
  if (filter.words !== undefined) {
    for (const word of searchableText(filter.words).split(' ')) {
      // A lone punctuation mark among real words adds nothing and would only be noise.
      if (SEARCHABLE.test(word)) terms.push(quoted(word));
    }
  }
  return terms.join(' ');
}

function quoted(text: string): string {
  return `"${text}"`;
}
