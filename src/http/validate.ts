import type { z } from 'zod';
import { AppError } from '../errors.js';

/**
 * Parses request input with a zod schema; a failure becomes `400 {error, code}` whose sentence
 * names the offending field, e.g. `body.alias: must be at most 64 characters`.
 */
export function parseInput<S extends z.ZodType>(schema: S, value: unknown, where: 'body' | 'query' | 'params'): z.output<S> {
  const result = schema.safeParse(value ?? (where === 'body' ? {} : value), { reportInput: true });
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const field = [where, ...(issue?.path ?? []).map(String)].join('.');
  const message = issue ? `${field}: ${describeIssue(issue)}` : `${where} is invalid`;
  throw new AppError(400, 'invalid_request', message);
}

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
