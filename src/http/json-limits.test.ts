import { describe, expect, it } from 'vitest';
import { forbiddenKeyPath, mayExceedNumeric, storableJsonText, utf8Text, writtenOutLength } from './json-limits.js';

describe('storableJsonText', () => {
  it.each([
    ['NUL', '{"a":"x\\u0000y"}', '{"a":"x\\ufffdy"}'],
    ['a lone high surrogate', '["\\ud83d!"]', '["\\ufffd!"]'],
    ['a lone low surrogate, upper case', '["\\uDE00"]', '["\\ufffd"]'],
    ['a high surrogate before another high one and its pair', '["\\ud83d\\ud83d\\ude00"]', '["\\ufffd\\ud83d\\ude00"]'],
    ['NUL in a key', '{"k\\u0000":1}', '{"k\\ufffd":1}'],
  ])('replaces %s by \\ufffd in the text', (_what, text, storable) => {
    expect(storableJsonText(text)).toBe(storable);
  });

  it.each([
    ['a surrogate pair', '["\\ud83d\\ude00"]'],
    ['an escaped backslash before u0000', '["C:\\\\u0000"]'],
    ['three backslashes: an escaped one, then a real escape of A', '["\\\\\\u0041"]'],
    ['a backslash written as \\u005c before u0000', '["\\u005cu0000"]'],
    ['numbers JavaScript cannot hold', '{"n":1e400,"m":1.50,"__proto__":123456789012345678901234567890}'],
  ])('leaves %s exactly as written', (_what, text) => {
    expect(storableJsonText(text)).toBe(text);
    expect(JSON.parse(storableJsonText(text))).toEqual(JSON.parse(text));
  });

  it('changes nothing but the escapes it replaces', () => {
    const text = '{ "a" : "\\u0000" ,\n "b": [1e400, "\\\\u0000"] }';
    expect(storableJsonText(text)).toBe('{ "a" : "\\ufffd" ,\n "b": [1e400, "\\\\u0000"] }');
  });
});

describe('forbiddenKeyPath', () => {
  const path = (text: string) => forbiddenKeyPath(text, JSON.parse(text));

  it('finds __proto__ and constructor keys anywhere, spelled any way', () => {
    expect(path('{"__proto__":1}')).toEqual(['__proto__']);
    expect(path('{"a":[0,{"constructor":null}]}')).toEqual(['a', '1', 'constructor']);
    expect(path('{"a":{"\\u0063onstructor":1}}')).toEqual(['a', 'constructor']);
  });

  it('leaves values, and keys that only contain the words', () => {
    expect(path('{"a":"__proto__","constructors":1,"x__proto__":["constructor"]}')).toBeUndefined();
    expect(path('[1,"a",null]')).toBeUndefined();
  });
});

describe('utf8Text', () => {
  it('reads UTF-8 and refuses anything else rather than replacing it', () => {
    expect(utf8Text(Buffer.from('ñ 😀'))).toBe('ñ 😀');
    expect(utf8Text(Buffer.from([0x61, 0xff]))).toBeUndefined();
    expect(utf8Text(Buffer.from([0xed, 0xa0, 0x80]))).toBeUndefined();
  });
});

describe('writtenOutLength', () => {
  it.each([
    ['no exponent', '{"a":1.50,"b":-12}', 18],
    ['1e400, as 401 digits', '[1e400]', 2 + 401],
    ['-1e-400, as -0. and 400 decimals', '[-1e-400]', 2 + 3 + 400],
    ['1.50e2, as 150', '[1.50e2]', 5],
    ['1.25E+1, as 12.5', '[1.25E+1]', 6],
    ['exponents inside a string, as they are', '["1e400 \\" 1e400"]', 18],
    ['an exponent after a key, a comma or white space', '{"a":1e3,"b":[1,2E2],"c": -1e2,\n"d":\t1e1}', 41],
    ['a number alone', '1e3', 4],
    ['ids that look like exponents, as they are', '{"id":"msg_0a4e5f6d-4e51-1e2d","n":1}', 37],
  ])('counts %s', (_what, text, length) => {
    expect(writtenOutLength(text)).toBe(length);
  });

  it('counts an exponent beyond any limit as far beyond it', () => {
    expect(writtenOutLength('[1e99999999999999999999]')).toBeGreaterThan(1e19);
    expect(writtenOutLength('[1e-99999999999999999999]')).toBeGreaterThan(1e19);
    expect(writtenOutLength(`[1e${'9'.repeat(400)}]`)).toBe(Number.POSITIVE_INFINITY);
  });
});

describe('mayExceedNumeric', () => {
  it.each([
    ['an exponent', '{"n":1e5}'],
    ['a negative exponent in a list', '[0,-2.5E-3]'],
    ['16384 digits after the point', `{"n":0.${'0'.repeat(16383)}1}`],
    ['131073 digits before it', `[1${'0'.repeat(131072)}]`],
  ])('says yes for %s', (_what, text) => {
    expect(mayExceedNumeric(text)).toBe(true);
  });

  it.each([
    ['no numbers', '{"title":"Crash when resized"}'],
    ['a UUID with an e between digits', '{"id":"123e4567-e89b-12d3-a456-426614174000"}'],
    ['30-digit integers and 1.50', '{"n":123456789012345678901234567890,"m":1.50}'],
    ['16383 digits after the point', `{"n":0.${'0'.repeat(16382)}1}`],
    ['a long text of digits and letters', `"${'1234567890a'.repeat(4000)}"`],
  ])('says no for %s', (_what, text) => {
    expect(mayExceedNumeric(text)).toBe(false);
  });
});
