import { nanoId } from './ids.js';

/**
 * Composio's error body: `{error: {message, code, status, request_id, suggested_fix?}}`.
 * The numeric codes follow Composio's ranges (200s auth config, 600s connected account, 800s
 * API key, 1200s trigger instance, 2600s trigger type, 10400 and up for plain HTTP errors); the exact number
 * per situation is a guess, as nothing public settles it. The SDK only reads `status`.
 */
export const SimCode = {
  badRequest: 10400,
  unauthorized: 10401,
  notFound: 10404,
  methodNotAllowed: 10405,
  rateLimited: 10429,
  internal: 10500,
  invalidApiKey: 801,
  authConfigRequired: 204,
  authConfigNotFound: 201,
  accountNotFound: 601,
  accountAliasTaken: 612,
  accountNotRevokable: 620,
  accountRevocationUnsupported: 621,
  sessionNotFound: 10404,
  toolkitNotFound: 10404,
  triggerInstanceNotFound: 1201,
  triggerInstanceConflict: 1209,
  triggerInstanceGone: 1210,
  triggerTypeNotFound: 2601,
  webhookSubscriptionNotFound: 10404,
  webhookSubscriptionExists: 10409,
} as const;

export class SimError extends Error {
  constructor(
    readonly status: number,
    readonly code: number,
    message: string,
    readonly suggestedFix?: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'SimError';
  }
}

export function errorBody(status: number, code: number, message: string, suggestedFix?: string): { error: Record<string, unknown> } {
  return {
    error: {
      message,
      code,
      status,
      request_id: nanoId('req', 16),
      ...(suggestedFix ? { suggested_fix: suggestedFix } : {}),
    },
  };
}

export const notFound = (what: string, code: number = SimCode.notFound) => new SimError(404, code, `${what} not found`);
export const badRequest = (message: string, code: number = SimCode.badRequest, fix?: string) => new SimError(400, code, message, fix);
