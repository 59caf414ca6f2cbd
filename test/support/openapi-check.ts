import { createHash } from 'node:crypto';
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { parse } from 'yaml';

/**
 * Every answer a test app gives is held against the committed `openapi.yaml`: its status must be
 * declared for the operation, its media type among that response's, and a JSON body valid
 * against that response's schema. The reference is generated from the routes, so this is what
 * keeps a route's declaration honest about what the route really says.
 */

type MediaTypes = Record<string, { schema?: unknown }>;
interface Operation {
  responses: Record<string, { content?: MediaTypes }>;
}
interface Spec {
  paths: Record<string, Record<string, Operation>>;
}

const SPEC_ID = 'openapi.yaml';
const METHODS = new Set(['get', 'put', 'post', 'delete', 'patch']);

/**
 * Answers the reference does not describe, so they are not checked:
 * - no route matched (Fastify's 404, `routeOptions.url` unset): a path the broker does not
 *   serve has no operation to hold the answer against;
 * - `HEAD`, which Fastify adds beside every `GET` and the reference leaves out;
 * - Swagger UI's own files under `/docs/` (the page `/docs` itself is described and checked).
 */
function described(method: string, route: string | undefined): route is string {
  if (route === undefined) return false;
  if (!METHODS.has(method.toLowerCase())) return false;
  return !route.startsWith('/docs/');
}

/** `/v1/triggers/:id` as the reference writes it, `/v1/triggers/{id}`. */
const specPath = (route: string) => route.replace(/:(\w+)/g, '{$1}');

/** A JSON pointer segment (`/` and `~` escaped). */
const pointer = (segment: string) => segment.replaceAll('~', '~0').replaceAll('/', '~1');

class SpecCheck {
  private readonly ajv = new Ajv2020({ strict: false, allErrors: true });
  private readonly validators = new Map<string, ValidateFunction>();

  constructor(private readonly spec: Spec) {
    addFormats.default(this.ajv);
    // The whole document under one id, so a response schema's `#/components/...` refs resolve in it.
    this.ajv.addSchema(spec as object, SPEC_ID);
  }

  /** What is wrong with an answer, or null when the reference describes it. */
  mismatch(method: string, route: string, status: number, contentType: string | undefined, payload: unknown): string | null {
    const path = specPath(route);
    const answer = `${method} ${path} answered ${status}`;
    const operation = this.spec.paths[path]?.[method.toLowerCase()];
    if (!operation) return `${method} ${path} is not in openapi.yaml`;
    const body = typeof payload === 'string' || Buffer.isBuffer(payload) ? payload.toString() : null;
    const code = String(status);
    const declared = [code, `${code[0]}XX`, 'default'].find((key) => operation.responses[key]);
    if (!declared) {
      // Any route may fail unexpectedly; the reference says once, not per operation, that every
      // error is `{error, code}`, so an undeclared 500 is held to that shape alone.
      if (status === 500) return this.bodyMismatch(answer, `${SPEC_ID}#/components/schemas/Error`, body ?? '');
      return `${answer}, which openapi.yaml does not declare for it (only ${Object.keys(operation.responses).join(', ')})`;
    }
    const content = operation.responses[declared]!.content ?? {};
    const mediaType = contentType?.split(';')[0]?.trim().toLowerCase();
    if (Object.keys(content).length === 0)
      return body ? `${answer} with a body, where openapi.yaml declares none: ${body.slice(0, 200)}` : null;
    if (!mediaType || !content[mediaType]) {
      return `${answer} as ${mediaType ?? 'no content type'}, where openapi.yaml declares ${Object.keys(content).join(', ')}`;
    }
    // A streamed body (an MCP stream, a file) is not held here; its status and media type were.
    if (body === null || mediaType !== 'application/json' || content[mediaType]!.schema === undefined) return null;
    const at = [path, method.toLowerCase(), 'responses', declared, 'content', mediaType, 'schema'].map(pointer).join('/');
    return this.bodyMismatch(answer, `${SPEC_ID}#/paths/${at}`, body);
  }

  /** What is wrong with a JSON body held against the schema at `ref`, or null. */
  private bodyMismatch(answer: string, ref: string, body: string): string | null {
    let parsed: unknown;
    try {
      parsed = JSON.parse(body);
    } catch {
      return `${answer} with a body that is not JSON: ${body.slice(0, 200)}`;
    }
    let validate = this.validators.get(ref);
    if (!validate) {
      validate = this.ajv.compile({ $ref: ref });
      this.validators.set(ref, validate);
    }
    if (validate(parsed)) return null;
    return `${answer} with a body openapi.yaml does not allow: ${this.ajv.errorsText(validate.errors, { dataVar: 'body' })}\n  body: ${body.slice(0, 500)}`;
  }
}

/**
 * The committed reference. Parsing its YAML costs most of a second in every test file, so the
 * parsed document is kept as JSON beside the other temporary files, one per version of the text.
 */
function readReference(): Spec {
  const text = readFileSync(new URL('../../openapi.yaml', import.meta.url), 'utf8');
  const kept = join(tmpdir(), `omb-openapi-${createHash('sha256').update(text).digest('hex').slice(0, 16)}.json`);
  try {
    return JSON.parse(readFileSync(kept, 'utf8')) as Spec;
  } catch {
    const spec = parse(text) as Spec;
    // Written aside and renamed, so a test file running alongside never reads half of it.
    const partial = `${kept}.${process.pid}`;
    writeFileSync(partial, JSON.stringify(spec));
    renameSync(partial, kept);
    return spec;
  }
}

let loaded: SpecCheck | undefined;
/** The reference, read once per test file. */
function specCheck(): SpecCheck {
  loaded ??= new SpecCheck(readReference());
  return loaded;
}

export interface AnswerCheck {
  /** Throws when the answer `app.inject` received did not match the reference. */
  claim(response: { raw: { res: ServerResponse } }): void;
  /** Mismatches of answers nobody claimed (sent over real HTTP), in the order they were sent. */
  unclaimed(): string[];
}

/**
 * Holds every answer `app` sends against the reference (an `onSend` hook, so answers over real
 * HTTP are seen too). A mismatch waits beside its answer: `claim` raises it in the test that
 * injected the request; the rest are for whoever closes the app.
 */
export function checkAnswers(app: FastifyInstance): AnswerCheck {
  const check = specCheck();
  const mismatches = new Map<ServerResponse, string>();
  app.addHook('onSend', async (request: FastifyRequest, reply: FastifyReply, payload: unknown) => {
    const route = request.routeOptions.url;
    if (!described(request.method, route)) return payload;
    const header = reply.getHeader('content-type');
    const contentType = typeof header === 'string' ? header : undefined;
    const problem = check.mismatch(request.method, route, reply.statusCode, contentType, payload);
    if (problem) mismatches.set(reply.raw, problem);
    return payload;
  });
  return {
    claim(response) {
      const problem = mismatches.get(response.raw.res);
      if (problem === undefined) return;
      mismatches.delete(response.raw.res);
      throw new Error(problem);
    },
    unclaimed: () => [...mismatches.values()],
  };
}
