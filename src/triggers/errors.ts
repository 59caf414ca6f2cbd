import { ComposioErrorCode } from '../composio/index.js';
import { AppError, notFound } from '../errors.js';

/** One answer for a trigger id that is unknown, malformed or another installation's. */
export const triggerNotFound = () => notFound('no trigger with this id', 'trigger_not_found');

/** Whether Composio said the thing asked about does not exist. */
export function isComposioNotFound(error: unknown): boolean {
  return error instanceof AppError && error.code === ComposioErrorCode.notFound;
}
