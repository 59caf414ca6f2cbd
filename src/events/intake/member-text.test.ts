import { describe, expect, it } from 'vitest';
import { jsonMemberText } from './member-text.js';

describe('a JSON member as written', () => {
  it('is the text between its colon and the next member, untouched', () => {
    const text =
      '{"type":"composio.trigger.message", "data" : {"b": 1.50, "a":[1, {"x":"}"}], "n":123456789012345678901234567890},"metadata":{}}';
    expect(jsonMemberText(text, 'data')).toBe('{"b": 1.50, "a":[1, {"x":"}"}], "n":123456789012345678901234567890}');
    expect(jsonMemberText(text, 'type')).toBe('"composio.trigger.message"');
    expect(jsonMemberText(text, 'missing')).toBeUndefined();
  });

  it('reads escapes in strings and keys, and takes the last of a key given twice', () => {
    const text = ' {\n "d\\u0061ta": "first", "x": "a\\"]}", "data": [true, null, -1e400, "\\\\"] } ';
    expect(jsonMemberText(text, 'data')).toBe('[true, null, -1e400, "\\\\"]');
    expect(jsonMemberText('{"data":null}', 'data')).toBe('null');
    expect(jsonMemberText('{"__proto__":{"a":1},"data":{"__proto__":7}}', 'data')).toBe('{"__proto__":7}');
  });

  it('answers nothing for a top level that is not an object', () => {
    expect(jsonMemberText('[{"data":1}]', 'data')).toBeUndefined();
    expect(jsonMemberText('{}', 'data')).toBeUndefined();
  });
});
