import { describe, expect, it } from 'vitest';
import { buildGmailQuery, labelTerm, searchableText } from './gmail-query.js';

/**
 * The query must never let a value escape its term: after building, every `"` the query holds
 * is one the builder put there, and nothing outside the quoted phrases can act as an operator.
 */
function unquotedParts(query: string): string {
  return query.replace(/"[^"]*"/g, '');
}

describe('buildGmailQuery', () => {
  it('is empty for an empty filter', () => {
    expect(buildGmailQuery({})).toBe('');
  });

  it('builds each key in a fixed order, whatever order the filter has', () => {
    expect(buildGmailQuery({ words: 'invoice', label: 'Billing', subject: 'March', from: 'ada@example.com' })).toBe(
      'from:"ada@example.com" subject:"March" label:Billing "invoice"',
    );
  });

  it('quotes from and subject as one phrase', () => {
    expect(buildGmailQuery({ from: 'Ada Lovelace' })).toBe('from:"Ada Lovelace"');
    expect(buildGmailQuery({ subject: 'quarterly report' })).toBe('subject:"quarterly report"');
  });

  it('quotes every word of words on its own: all must appear, in any order', () => {
    expect(buildGmailQuery({ words: 'invoice  overdue' })).toBe('"invoice" "overdue"');
  });

  it('keeps OR, AND and a leading minus inside quotes, where they are plain text', () => {
    expect(buildGmailQuery({ from: 'a OR b' })).toBe('from:"a OR b"');
    expect(buildGmailQuery({ subject: 'x AND y' })).toBe('subject:"x AND y"');
    expect(buildGmailQuery({ from: '-ada' })).toBe('from:"-ada"');
    expect(buildGmailQuery({ words: 'cats OR dogs -mice' })).toBe('"cats" "OR" "dogs" "-mice"');
  });

  it('keeps parentheses, braces and colons inside quotes', () => {
    const query = buildGmailQuery({ subject: '(a) {b c} from:evil label:x' });
    expect(query).toBe('subject:"(a) {b c} from:evil label:x"');
    expect(unquotedParts(query)).toBe('subject:');
  });

  it('turns embedded double quotes into spaces, so a value cannot close its phrase', () => {
    const query = buildGmailQuery({ from: 'a" OR from:"b' });
    expect(query).toBe('from:"a OR from: b"');
    expect(unquotedParts(query)).toBe('from:');
  });

  it('treats typographic and full-width quotes like straight ones', () => {
    expect(buildGmailQuery({ subject: '“hello” „there‟ ＂x＂' })).toBe('subject:"hello there x"');
  });

  it('drops backslashes, so no layer can read an escape', () => {
    expect(buildGmailQuery({ subject: 'a\\" OR b' })).toBe('subject:"a OR b"');
    expect(buildGmailQuery({ words: 'C:\\path\\file' })).toBe('"C:" "path" "file"');
  });

  it('turns newlines, tabs and other control characters into single spaces', () => {
    expect(buildGmailQuery({ subject: 'one\ntwo\r\nthree\tfour\u0000five\u007Fsix\u0085seven\u2028eight' })).toBe(
      'subject:"one two three four five six seven eight"',
    );
    expect(buildGmailQuery({ words: 'a\nOR\nb' })).toBe('"a" "OR" "b"');
  });

  it('keeps accents, other scripts and emoji', () => {
    expect(buildGmailQuery({ from: 'José Müller' })).toBe('from:"José Müller"');
    expect(buildGmailQuery({ subject: '東京 会議' })).toBe('subject:"東京 会議"');
    expect(buildGmailQuery({ words: '🎉 Привет' })).toBe('"🎉" "Привет"');
  });

  it('normalises to NFC, so composed and decomposed accents search the same', () => {
    expect(buildGmailQuery({ from: 'Jose\u0301' })).toBe(buildGmailQuery({ from: 'José' }));
  });

  it('drops punctuation-only words among real ones', () => {
    expect(buildGmailQuery({ words: 'invoice - ( ) overdue' })).toBe('"invoice" "overdue"');
  });

  it('leaves out values with nothing searchable (validation refuses them before this)', () => {
    expect(buildGmailQuery({ from: '', subject: '   ', label: '---', words: '\n\t' })).toBe('');
  });

  it('handles very long values without changing them', () => {
    const long = 'a'.repeat(256);
    expect(buildGmailQuery({ subject: long })).toBe(`subject:"${long}"`);
    const many = Array.from({ length: 100 }, (_, i) => `w${i}`).join(' ');
    expect(buildGmailQuery({ words: many }).split(' ')).toHaveLength(100);
  });

  it('never leaves a quote unbalanced or text outside a term, for any hostile value', () => {
    const hostile = ['"', '\\"', '"" OR ""', 'a"b"c', '\\', '" -from:x "', '(', ')', '{', '}', ':', '-', 'OR', '\u0000"\n"'];
    for (const value of hostile) {
      for (const key of ['from', 'subject', 'words'] as const) {
        const query = buildGmailQuery({ [key]: `x ${value} y` });
        expect((query.match(/"/g) ?? []).length % 2, `${key}: ${value}`).toBe(0);
        expect(
          unquotedParts(query)
            .replace(/(from|subject):/g, '')
            .trim(),
          `${key}: ${value}`,
        ).toBe('');
      }
    }
  });
});

describe('labels', () => {
  it('use Gmail’s hyphenated form for spaces, slashes and punctuation', () => {
    expect(buildGmailQuery({ label: 'Work/Clients (EU)' })).toBe('label:Work-Clients-EU');
    expect(labelTerm('my label')).toBe('my-label');
    expect(labelTerm('a "b" {c} OR d')).toBe('a-b-c-OR-d');
  });

  it('cannot start with a minus (negation) or contain a colon or quote', () => {
    expect(labelTerm('-INBOX')).toBe('INBOX');
    expect(labelTerm('x:y')).toBe('x-y');
    expect(labelTerm('"x')).toBe('x');
  });

  it('keep letters of any script, dots, underscores and emoji', () => {
    expect(labelTerm('Rechnungen/Ärzte')).toBe('Rechnungen-Ärzte');
    expect(labelTerm('v1.2_final')).toBe('v1.2_final');
    expect(labelTerm('🔥 hot')).toBe('🔥-hot');
  });

  it('are empty when nothing searchable is left', () => {
    expect(labelTerm(' / - ')).toBe('');
  });
});

describe('searchableText', () => {
  it('is empty for empty, whitespace-only and punctuation-only values', () => {
    for (const value of ['', ' ', '\t\n', '"', '\\', '-', '( )', '{}', ':', '..']) expect(searchableText(value)).toBe('');
  });

  it('keeps a value with one letter, digit or symbol', () => {
    expect(searchableText(' a ')).toBe('a');
    expect(searchableText('7')).toBe('7');
    expect(searchableText('☕')).toBe('☕');
  });
});
