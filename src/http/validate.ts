import type { FastifySchemaCompiler } from 'fastify';
import type { z } from 'zod';
import { AppError } from '../errors.js';

type RequestPart = 'body' | 'query' | 'params' | 'headers';

/**
 * Parses request input with a zod schema; a failure becomes `400 {error, code}` whose sentence
 * names the offending field, e.g. `body.alias: must be at most 64 characters`. A missing body
 * is read as `{}`.
 */
export function parseInput<S extends z.ZodType>(schema: S, value: unknown, where: RequestPart): z.output<S> {
  const result = schema.safeParse(value ?? (where === 'body' ? {} : value), { reportInput: true });
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const field = [where, ...(issue?.path ?? []).map(String)].join('.');
  const message = issue ? `${field}: ${describeIssue(issue)}` : `${where} is invalid`;
  throw new AppError(400, 'invalid_request', message);
}

/**
 * Fastify's validator for the zod schemas routes declare: the same parsing and the same
 * sentences as `parseInput`, so a route answers a bad field exactly as it did when handlers
 * parsed their own input. Fastify hands over a missing body as `null`.
 */
export const validatorCompiler: FastifySchemaCompiler<z.ZodType> = ({ schema, httpPart }) => {
  const where: RequestPart = httpPart === 'querystring' ? 'query' : ((httpPart ?? 'body') as RequestPart);
  return (value) => {
    try {
      return { value: parseInput(schema, value, where) };
    } catch (error) {
      return { error: error as AppError };
    }
  };
};

function describeIssue(issue: z.core.$ZodIssue): string {
  switch (issue.code) {
    case 'unrecognized_keys':
      return `unknown field${issue.keys.length > 1 ? 's' : ''} ${issue.keys.join(', ')}`;
    case 'invalid_type':
      return issue.input === undefined ? 'is required' : `must be ${issue.expected}`;
    default:
      return issue.message.charAt(0).toLowerCase() + issue.message.slice(1);
  }
}
