/**
 * A trigger's `config` held against its type's config schema, the JSON Schema Composio's
 * discovery answers (pydantic's output: `type`, `properties`, `required`, `default`, `enum`,
 * `anyOf` with `null` for optional fields, `$ref` into `$defs`, `items`, the numeric and length
 * bounds). A refusal here names the field before Composio is asked to make the trigger.
 *
 * Only that subset is read; any other keyword allows everything, so a schema this does not
 * understand is left to Composio rather than refused here. `pattern` is one of those on purpose:
 * it is a regular expression of Python's dialect, and a client's text run through a pattern the
 * broker did not write could take any amount of time.
 */

export interface ConfigIssue {
  /** Keys (and array indexes) from the config's top level down to the offending value. */
  readonly path: readonly string[];
  /** What is wrong, as the end of a sentence: "must be a string". */
  readonly message: string;
}

/** Nesting and `$ref` hops followed before the rest of a schema is taken on trust (a `$ref` may loop). */
const MAX_SCHEMA_DEPTH = 32;
/** Enum values and setting names listed in a refusal before it says "…". */
const MAX_LISTED = 10;

type Schema = Record<string, unknown>;

/** The first way `config` breaks `schema`, or null when it does not (or when the schema says nothing readable). */
export function configSchemaIssue(schema: unknown, config: Record<string, unknown>): ConfigIssue | null {
  return check(schema, schema, config, [], 0);
}

function check(root: unknown, schema: unknown, value: unknown, path: string[], depth: number): ConfigIssue | null {
  if (schema === false) return { path, message: 'is not accepted here' };
  if (!isObject(schema) || depth > MAX_SCHEMA_DEPTH) return null;
  const next = depth + 1;

  if (typeof schema.$ref === 'string') {
    const issue = check(root, resolveRef(root, schema.$ref), value, path, next);
    if (issue) return issue;
  }
  for (const part of asArray(schema.allOf)) {
    const issue = check(root, part, value, path, next);
    if (issue) return issue;
  }
  for (const key of ['anyOf', 'oneOf'] as const) {
    // `oneOf` is read as `anyOf`: pydantic writes it for unions whose members do not overlap.
    const issue = firstMatching(root, asArray(schema[key]), value, path, next);
    if (issue) return issue;
  }

  const types = typesOf(schema);
  if (types && !types.some((type) => hasType(value, type))) return { path, message: `must be ${describeTypes(types)}` };
  if (Array.isArray(schema.enum) && !schema.enum.some((allowed) => sameJson(allowed, value))) {
    return { path, message: `must be one of ${listed(schema.enum.map((v) => JSON.stringify(v)))}` };
  }
  if (Object.hasOwn(schema, 'const') && !sameJson(schema.const, value)) {
    return { path, message: `must be ${JSON.stringify(schema.const)}` };
  }

  if (typeof value === 'number') return numberIssue(schema, value, path);
  if (typeof value === 'string') return stringIssue(schema, value, path);
  if (Array.isArray(value)) return arrayIssue(root, schema, value, path, next);
  if (isObject(value)) return objectIssue(root, schema, value, path, next);
  return null;
}

/** Passes when one variant accepts the value; else the refusal of the variant of the value's own type. */
function firstMatching(root: unknown, variants: unknown[], value: unknown, path: string[], depth: number): ConfigIssue | null {
  if (variants.length === 0) return null;
  const issues: ConfigIssue[] = [];
  for (const variant of variants) {
    const issue = check(root, variant, value, path, depth);
    if (!issue) return null;
    issues.push(issue);
  }
  const ofItsType = variants.findIndex((variant) => isObject(variant) && typesOf(variant)?.some((type) => hasType(value, type)));
  if (ofItsType >= 0) return issues[ofItsType] ?? null;
  const types = variants.flatMap((variant) => (isObject(variant) ? (typesOf(variant) ?? []) : []));
  return types.length > 0 ? { path, message: `must be ${describeTypes([...new Set(types)])}` } : (issues[0] ?? null);
}

function numberIssue(schema: Schema, value: number, path: string[]): ConfigIssue | null {
  const { minimum, maximum, exclusiveMinimum, exclusiveMaximum } = schema;
  // Draft 4 writes an exclusive bound as `exclusiveMinimum: true` beside `minimum`; later drafts as a number.
  const above = typeof exclusiveMinimum === 'number' ? exclusiveMinimum : exclusiveMinimum === true ? minimum : undefined;
  const below = typeof exclusiveMaximum === 'number' ? exclusiveMaximum : exclusiveMaximum === true ? maximum : undefined;
  if (typeof above === 'number' && !(value > above)) return { path, message: `must be more than ${above}` };
  if (typeof below === 'number' && !(value < below)) return { path, message: `must be less than ${below}` };
  if (typeof minimum === 'number' && value < minimum) return { path, message: `must be at least ${minimum}` };
  if (typeof maximum === 'number' && value > maximum) return { path, message: `must be at most ${maximum}` };
  return null;
}

function stringIssue(schema: Schema, value: string, path: string[]): ConfigIssue | null {
  // JSON Schema counts characters (code points), not UTF-16 units.
  const length = [...value].length;
  if (typeof schema.minLength === 'number' && length < schema.minLength) {
    return { path, message: schema.minLength === 1 ? 'must not be empty' : `must be at least ${schema.minLength} characters` };
  }
  if (typeof schema.maxLength === 'number' && length > schema.maxLength) {
    return { path, message: `must be at most ${schema.maxLength} characters` };
  }
  return null;
}

function arrayIssue(root: unknown, schema: Schema, value: unknown[], path: string[], depth: number): ConfigIssue | null {
  if (typeof schema.minItems === 'number' && value.length < schema.minItems) {
    return { path, message: `must have at least ${schema.minItems} items` };
  }
  if (typeof schema.maxItems === 'number' && value.length > schema.maxItems) {
    return { path, message: `must have at most ${schema.maxItems} items` };
  }
  // `prefixItems` (or draft 4's array form of `items`) describes the first items one by one.
  const prefix = Array.isArray(schema.prefixItems) ? schema.prefixItems : Array.isArray(schema.items) ? schema.items : [];
  const rest = Array.isArray(schema.items) ? undefined : schema.items;
  for (const [index, item] of value.entries()) {
    const issue = check(root, index < prefix.length ? prefix[index] : rest, item, [...path, String(index)], depth);
    if (issue) return issue;
  }
  return null;
}

function objectIssue(root: unknown, schema: Schema, value: Schema, path: string[], depth: number): ConfigIssue | null {
  const properties = isObject(schema.properties) ? schema.properties : {};
  for (const key of asArray(schema.required)) {
    if (typeof key === 'string' && !Object.hasOwn(value, key)) return { path: [...path, key], message: 'is required' };
  }
  for (const [key, item] of Object.entries(value)) {
    // `Object.hasOwn`: a key such as `constructor` must not find Object's prototype.
    const known = Object.hasOwn(properties, key);
    if (!known && schema.additionalProperties === false) {
      const names = Object.keys(properties);
      return {
        path: [...path, key],
        message: names.length > 0 ? `is not a setting of this trigger; use ${listed(names)}` : 'is not a setting of this trigger',
      };
    }
    const issue = check(root, known ? properties[key] : schema.additionalProperties, item, [...path, key], depth);
    if (issue) return issue;
  }
  return null;
}

/** `#/$defs/Name` (or `#/definitions/Name`, any JSON pointer into the schema); anything else is unknown. */
function resolveRef(root: unknown, ref: string): unknown {
  if (!ref.startsWith('#')) return undefined;
  let at: unknown = root;
  for (const raw of ref.slice(1).split('/').slice(1)) {
    const key = decodeURIComponent(raw).replaceAll('~1', '/').replaceAll('~0', '~');
    if (!isObject(at) || !Object.hasOwn(at, key)) return undefined;
    at = at[key];
  }
  return at;
}

const TYPE_NAMES: Record<string, string> = {
  string: 'a string',
  number: 'a number',
  integer: 'a whole number',
  boolean: 'true or false',
  object: 'an object',
  array: 'a list',
  null: 'null',
};

/** The JSON types the schema names, or null when it names none (or none this reads). */
function typesOf(schema: Schema): string[] | null {
  const named = (Array.isArray(schema.type) ? schema.type : [schema.type]).filter(
    (type): type is string => typeof type === 'string' && Object.hasOwn(TYPE_NAMES, type),
  );
  return named.length > 0 ? named : null;
}

function hasType(value: unknown, type: string): boolean {
  switch (type) {
    case 'string':
      return typeof value === 'string';
    case 'number':
      return typeof value === 'number';
    case 'integer':
      return Number.isInteger(value);
    case 'boolean':
      return typeof value === 'boolean';
    case 'array':
      return Array.isArray(value);
    case 'object':
      return isObject(value);
    case 'null':
      return value === null;
    default:
      return true;
  }
}

function describeTypes(types: readonly string[]): string {
  const names = types.map((type) => TYPE_NAMES[type] ?? type);
  return names.length === 1 ? (names[0] as string) : `${names.slice(0, -1).join(', ')} or ${names.at(-1)}`;
}

function listed(items: readonly string[]): string {
  return items.length > MAX_LISTED ? `${items.slice(0, MAX_LISTED).join(', ')}, …` : items.join(', ');
}

/** JSON equality: objects compare by their keys, whatever the order. */
function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((item, i) => sameJson(item, b[i]));
  }
  if (!isObject(a) || !isObject(b)) return false;
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((key) => Object.hasOwn(b, key) && sameJson(a[key], b[key]));
}

function isObject(value: unknown): value is Schema {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function asArray(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}
