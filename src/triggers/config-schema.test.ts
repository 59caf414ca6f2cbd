import { describe, expect, it } from 'vitest';
import { configSchemaIssue } from './config-schema.js';

const object = (properties: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({ type: 'object', properties, ...extra });
const issue = (schema: unknown, config: Record<string, unknown>) => configSchemaIssue(schema, config);
const refusal = (path: string[], message: string) => ({ path, message });

describe('configSchemaIssue', () => {
  it('accepts what the schema allows, and anything under a schema it cannot read', () => {
    const schema = object({ interval: { type: 'number' }, labelIds: { type: 'string' } });
    expect(issue(schema, { interval: 15, labelIds: 'INBOX', other: { any: ['thing'] } })).toBeNull();
    for (const unreadable of [undefined, null, true, {}, { type: 'object' }, { type: 'no-such-type' }, []]) {
      expect(issue(unreadable, { x: 1 })).toBeNull();
    }
  });

  it('checks types, naming every allowed one', () => {
    expect(issue(object({ n: { type: 'integer' } }), { n: 1.5 })).toEqual(refusal(['n'], 'must be a whole number'));
    expect(issue(object({ n: { type: 'integer' } }), { n: 2 })).toBeNull();
    expect(issue(object({ b: { type: 'boolean' } }), { b: 'yes' })).toEqual(refusal(['b'], 'must be true or false'));
    expect(issue(object({ s: { type: ['string', 'null'] } }), { s: null })).toBeNull();
    expect(issue(object({ s: { type: ['string', 'number', 'null'] } }), { s: [] })).toEqual(
      refusal(['s'], 'must be a string, a number or null'),
    );
    expect(issue(object({ o: { type: 'object' } }), { o: [] })).toEqual(refusal(['o'], 'must be an object'));
  });

  it('checks enum and const by JSON value', () => {
    const schema = object({ e: { enum: ['a', 1, { k: [true] }] }, c: { const: 'fixed' } });
    expect(issue(schema, { e: { k: [true] }, c: 'fixed' })).toBeNull();
    expect(issue(schema, { e: 'b' })).toEqual(refusal(['e'], 'must be one of "a", 1, {"k":[true]}'));
    expect(issue(schema, { c: 'other' })).toEqual(refusal(['c'], 'must be "fixed"'));
  });

  it('checks numeric bounds, exclusive ones in both drafts', () => {
    const schema = object({
      a: { minimum: 1, maximum: 10 },
      b: { exclusiveMinimum: 0, exclusiveMaximum: 5 },
      c: { minimum: 0, exclusiveMinimum: true },
    });
    expect(issue(schema, { a: 1, b: 4.9, c: 0.1 })).toBeNull();
    expect(issue(schema, { a: 11 })).toEqual(refusal(['a'], 'must be at most 10'));
    expect(issue(schema, { a: 0 })).toEqual(refusal(['a'], 'must be at least 1'));
    expect(issue(schema, { b: 0 })).toEqual(refusal(['b'], 'must be more than 0'));
    expect(issue(schema, { b: 5 })).toEqual(refusal(['b'], 'must be less than 5'));
    expect(issue(schema, { c: 0 })).toEqual(refusal(['c'], 'must be more than 0'));
  });

  it('counts string length in characters, and leaves patterns to Composio', () => {
    const schema = object({ s: { type: 'string', minLength: 2, maxLength: 3, pattern: '^(a+)+$' } });
    expect(issue(schema, { s: '😀😀😀' })).toBeNull();
    expect(issue(schema, { s: '😀😀😀😀' })).toEqual(refusal(['s'], 'must be at most 3 characters'));
    expect(issue(schema, { s: 'x' })).toEqual(refusal(['s'], 'must be at least 2 characters'));
  });

  it('checks list items, their count and the first items one by one', () => {
    const schema = object({
      list: { type: 'array', items: { type: 'string' }, minItems: 1, maxItems: 2 },
      pair: { type: 'array', prefixItems: [{ type: 'string' }, { type: 'number' }], items: false },
    });
    expect(issue(schema, { list: ['a'], pair: ['a', 1] })).toBeNull();
    expect(issue(schema, { list: [] })).toEqual(refusal(['list'], 'must have at least 1 items'));
    expect(issue(schema, { list: ['a', 2] })).toEqual(refusal(['list', '1'], 'must be a string'));
    expect(issue(schema, { pair: ['a', 'b'] })).toEqual(refusal(['pair', '1'], 'must be a number'));
    expect(issue(schema, { pair: ['a', 1, 'extra'] })).toEqual(refusal(['pair', '2'], 'is not accepted here'));
  });

  it('checks required fields and closed settings, nested too', () => {
    const schema = object(
      { repo: { type: 'string' }, inner: object({ id: { type: 'string' } }, { required: ['id'], additionalProperties: false }) },
      { required: ['repo'], additionalProperties: false },
    );
    expect(issue(schema, { repo: 'r', inner: { id: 'x' } })).toBeNull();
    expect(issue(schema, {})).toEqual(refusal(['repo'], 'is required'));
    expect(issue(schema, { repo: 'r', branch: 'main' })).toEqual(refusal(['branch'], 'is not a setting of this trigger; use repo, inner'));
    expect(issue(schema, { repo: 'r', inner: {} })).toEqual(refusal(['inner', 'id'], 'is required'));
    // A key named like one of Object's own properties is just another unknown setting.
    expect(issue(schema, { repo: 'r', constructor: 1 })).toEqual(
      refusal(['constructor'], 'is not a setting of this trigger; use repo, inner'),
    );
    expect(issue(object({}, { additionalProperties: { type: 'number' } }), { extra: 'x' })).toEqual(refusal(['extra'], 'must be a number'));
  });

  it('reads anyOf and oneOf as "one of these", answering with the variant of the value’s type', () => {
    const schema = object({
      maybe: { anyOf: [{ type: 'string', maxLength: 2 }, { type: 'null' }] },
      either: { oneOf: [{ type: 'number' }, { type: 'array', items: { type: 'number' } }] },
    });
    expect(issue(schema, { maybe: null, either: [1, 2] })).toBeNull();
    expect(issue(schema, { maybe: 'long' })).toEqual(refusal(['maybe'], 'must be at most 2 characters'));
    expect(issue(schema, { maybe: 3 })).toEqual(refusal(['maybe'], 'must be a string or null'));
    expect(issue(schema, { either: ['x'] })).toEqual(refusal(['either', '0'], 'must be a number'));
  });

  it('follows $ref into $defs and definitions, and allOf; an unknown or looping $ref allows everything', () => {
    const schema = {
      type: 'object',
      properties: {
        state: { allOf: [{ $ref: '#/$defs/State' }], default: 'open' },
        old: { $ref: '#/definitions/Old' },
        lost: { $ref: '#/$defs/Missing' },
        elsewhere: { $ref: 'https://example.com/schema.json' },
        loop: { $ref: '#/$defs/Loop' },
      },
      $defs: { State: { type: 'string', enum: ['open', 'closed'] }, Loop: { $ref: '#/$defs/Loop' } },
      definitions: { Old: { type: 'integer' } },
    };
    expect(issue(schema, { state: 'closed', old: 1, lost: {}, elsewhere: 1, loop: 'x' })).toBeNull();
    expect(issue(schema, { state: 'merged' })).toEqual(refusal(['state'], 'must be one of "open", "closed"'));
    expect(issue(schema, { old: 'one' })).toEqual(refusal(['old'], 'must be a whole number'));
  });

  it('lists at most ten names in a refusal', () => {
    const values = Array.from({ length: 12 }, (_, i) => `v${i}`);
    expect(issue(object({ e: { enum: values } }), { e: 'x' })?.message).toBe(
      `must be one of ${values
        .slice(0, 10)
        .map((v) => `"${v}"`)
        .join(', ')}, …`,
    );
  });
});
