import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { ComposioGateway, TriggerType } from '../composio/index.js';
import { MIN_POLL_INTERVAL_MINUTES } from './composio-config.js';

/** Ten minutes, like the toolkit catalog. */
const FRESH_MS = 10 * 60 * 1000;
/** Toolkits kept at once; the least recently fetched goes first. Slugs are checked before they get here. */
const MAX_TOOLKITS = 200;

/** A trigger type as `GET /v1/triggers/types` answers it, for the automation editor. */
export interface TriggerTypeView {
  readonly slug: string;
  readonly name: string;
  readonly description: string;
  /** Composio checks the app on an interval (rather than the app pushing events). */
  readonly polled: boolean;
  /** For polled types: the shortest interval the broker asks for (15 minutes). */
  readonly minimumIntervalMinutes: number | null;
  readonly configSchema: Record<string, unknown>;
  /** Data shaped like the type's events, made from its payload schema. */
  readonly samplePayload: Record<string, unknown>;
}

interface Copy {
  readonly types: readonly TriggerType[];
  readonly fetchedAt: number;
}

/**
 * Composio's trigger types per toolkit, shared by every installation of this process: fetched
 * at most once per ten minutes per toolkit (concurrent requests share one fetch), and the last
 * copy is served while Composio is down. Creating a trigger reads its type from here too.
 */
export class TriggerTypeCache {
  private readonly copies = new Map<string, Copy>();
  private readonly inFlight = new Map<string, Promise<Copy>>();

  constructor(
    private readonly composio: Pick<ComposioGateway, 'listTriggerTypes'>,
    private readonly clock: Clock,
    private readonly logger: Pick<Logger, 'warn'>,
  ) {}

  /** The toolkit's types and how old the copy is; throws Composio's failure only when there is no copy. */
  async get(toolkit: string): Promise<{ types: readonly TriggerType[]; ageSeconds: number }> {
    const now = this.clock.now().getTime();
    const held = this.copies.get(toolkit);
    if (held && now - held.fetchedAt < FRESH_MS) return view(held, now);
    let copy: Copy;
    try {
      copy = await this.refresh(toolkit);
    } catch (error) {
      const stale = this.copies.get(toolkit);
      if (!stale) throw error;
      this.logger.warn({ err: error, toolkit, ageSeconds: Math.round((now - stale.fetchedAt) / 1000) }, 'serving stale trigger types');
      copy = stale;
    }
    return view(copy, now);
  }

  /** One type, from the toolkit's copy (fetched if needed); undefined when the toolkit has no such type. */
  async find(toolkit: string, slug: string): Promise<TriggerType | undefined> {
    const { types } = await this.get(toolkit);
    const wanted = slug.toUpperCase();
    return types.find((t) => t.slug.toUpperCase() === wanted);
  }

  /** A type already held, whatever its age, without asking Composio. */
  peek(toolkit: string, slug: string): TriggerType | undefined {
    const wanted = slug.toUpperCase();
    return this.copies.get(toolkit)?.types.find((t) => t.slug.toUpperCase() === wanted);
  }

  private refresh(toolkit: string): Promise<Copy> {
    let pending = this.inFlight.get(toolkit);
    if (!pending) {
      pending = this.composio
        .listTriggerTypes(toolkit)
        .then((types) => {
          const copy = { types, fetchedAt: this.clock.now().getTime() };
          this.copies.delete(toolkit);
          this.copies.set(toolkit, copy);
          if (this.copies.size > MAX_TOOLKITS) this.copies.delete(this.copies.keys().next().value as string);
          return copy;
        })
        .finally(() => this.inFlight.delete(toolkit));
      this.inFlight.set(toolkit, pending);
    }
    return pending;
  }
}

function view(copy: Copy, now: number) {
  return { types: copy.types, ageSeconds: Math.max(0, Math.floor((now - copy.fetchedAt) / 1000)) };
}

export function toTriggerTypeView(type: TriggerType): TriggerTypeView {
  const polled = type.type === 'poll';
  return {
    slug: type.slug,
    name: type.name,
    description: type.description,
    polled,
    minimumIntervalMinutes: polled ? MIN_POLL_INTERVAL_MINUTES : null,
    configSchema: type.toolkit.toLowerCase() === 'gmail' ? withoutProperty(type.configSchema, 'query') : type.configSchema,
    samplePayload: samplePayload(type.payloadSchema),
  };
}

/**
 * A config schema without one property (Gmail's `query`, which the broker writes from the filter and
 * refuses in `config`): what the editor offers is what a create accepts.
 */
function withoutProperty(schema: Record<string, unknown>, name: string): Record<string, unknown> {
  const properties = schema.properties;
  if (typeof properties !== 'object' || properties === null || !Object.hasOwn(properties, name)) return schema;
  const { [name]: _dropped, ...kept } = properties as Record<string, unknown>;
  const required = Array.isArray(schema.required) ? schema.required.filter((field) => field !== name) : schema.required;
  return { ...schema, properties: kept, ...(required === undefined ? {} : { required }) };
}

/**
 * A value for each property of a JSON Schema: its first example, else a non-null default, else
 * a placeholder of its type (strings say which field they stand for). Deep schemas are cut at a
 * few levels; nothing here is real data.
 */
export function samplePayload(schema: Record<string, unknown>): Record<string, unknown> {
  const value = sampleOf(schema, 'payload', 0);
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}

function sampleOf(schema: unknown, name: string, depth: number): unknown {
  if (schema === null || typeof schema !== 'object' || depth > 4) return null;
  const s = schema as Record<string, unknown>;
  if (Array.isArray(s.examples) && s.examples.length > 0) return s.examples[0];
  if (s.default !== undefined && s.default !== null) return s.default;
  const variants = (Array.isArray(s.anyOf) ? s.anyOf : Array.isArray(s.oneOf) ? s.oneOf : []) as unknown[];
  const chosen = variants.find((v) => typeof v === 'object' && v !== null && (v as { type?: unknown }).type !== 'null');
  if (chosen) return sampleOf(chosen, name, depth);
  const type = Array.isArray(s.type) ? s.type.find((t) => t !== 'null') : s.type;
  switch (type) {
    case 'string':
      return `sample ${name}`;
    case 'number':
    case 'integer':
      return 0;
    case 'boolean':
      return false;
    case 'array':
      return [];
    case 'object':
    case undefined: {
      const properties = s.properties;
      if (properties === null || typeof properties !== 'object') return type === 'object' ? {} : null;
      return Object.fromEntries(Object.entries(properties).map(([key, property]) => [key, sampleOf(property, key, depth + 1)]));
    }
    default:
      return null;
  }
}
