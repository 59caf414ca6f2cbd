import type { FastifyInstance } from 'fastify';
import { AppError } from '../errors.js';
import { excessiveNesting, MAX_JSON_DEPTH } from './json-limits.js';

/**
 * JSON bodies as Fastify parses them (prototype-poisoning guards included), except that an
 * empty body counts as no body: clients send `content-type: application/json` on a `DELETE`
 * or a body-less `POST` too, and that must not be mistaken for bad JSON.
 */
export function acceptEmptyJsonBodies(app: FastifyInstance): void {
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    if (typeof body === 'string' && body.trim() === '') {
      done(null, undefined);
      return;
    }
    // Before parsing: what walks the parsed value (validation, storing) recurses.
    const nested = excessiveNesting(body as string);
    if (nested) {
      done(tooDeep(nested.field === undefined ? 'body' : `body.${nested.field}`), undefined);
      return;
    }
    parseJson(request, body as string, done);
  });
}

/** `400 json_too_deep`, naming where. */
export function tooDeep(where: string): AppError {
  return new AppError(400, 'json_too_deep', `${where}: nests more than ${MAX_JSON_DEPTH} levels of objects and arrays`);
}
