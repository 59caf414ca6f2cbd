import { errorCodes, type FastifyInstance, type FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';
import { excessiveNesting, forbiddenKeyPath, MAX_JSON_DEPTH, utf8Text } from './json-limits.js';

/**
 * The one rule for request bodies on the API (the webhook and MCP routes read their own bytes):
 * - an empty body is no body, whatever its content type: clients send
 *   `content-type: application/json` on a `DELETE` or a body-less `POST` too;
 * - any other body must be `application/json` (a `charset` parameter changes nothing: JSON is
 *   UTF-8), else `415 unsupported_media_type`, for text, forms and multipart alike;
 * - it must be UTF-8 (`400 invalid_utf8`, never read with U+FFFD in place of what was sent),
 *   nest at most 64 levels (`400 json_too_deep`), parse (`400 invalid_json`), and hold no
 *   `__proto__` or `constructor` key (`400 forbidden_key`, naming where).
 */
export function parseJsonBodies(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_request, body, done) => {
    try {
      done(null, parseJsonBody(body as Buffer));
    } catch (error) {
      done(error as Error, undefined);
    }
  });
  // Not read: a body in another media type is refused as it starts.
  app.addContentTypeParser('*', (request, _payload, done) => {
    if (hasNoBody(request)) done(null, undefined);
    else done(new errorCodes.FST_ERR_CTP_INVALID_MEDIA_TYPE(), undefined);
  });
}

/** A JSON body as the routes receive it: undefined when empty (see parseJsonBodies). */
function parseJsonBody(bytes: Buffer): unknown {
  const text = utf8Text(bytes);
  if (text === undefined) throw new AppError(400, 'invalid_utf8', 'body is not valid UTF-8');
  if (text.trim() === '') return undefined;
  // Before parsing: what walks the parsed value (validation, storing) recurses.
  const nested = excessiveNesting(text);
  if (nested) throw tooDeep(nested.field === undefined ? 'body' : `body.${nested.field}`);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new errorCodes.FST_ERR_CTP_INVALID_JSON_BODY();
  }
  const forbidden = forbiddenKeyPath(text, value);
  if (forbidden) {
    throw new AppError(400, 'forbidden_key', `${['body', ...forbidden].join('.')}: keys named __proto__ or constructor are not accepted`);
  }
  return value;
}

/** As HTTP/1.1 has it: no `transfer-encoding`, and no `content-length` or zero. */
function hasNoBody(request: FastifyRequest): boolean {
  const length = request.headers['content-length'];
  return request.headers['transfer-encoding'] === undefined && (length === undefined || length === '0');
}

/** `400 json_too_deep`, naming where. */
export function tooDeep(where: string): AppError {
  return new AppError(400, 'json_too_deep', `${where}: nests more than ${MAX_JSON_DEPTH} levels of objects and arrays`);
}
