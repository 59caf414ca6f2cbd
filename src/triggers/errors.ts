import { conflict, notFound } from '../errors.js';

/** One answer for a trigger id that is unknown, malformed or another installation's. */
export const triggerNotFound = () => notFound('no trigger with this id', 'trigger_not_found');

/**
 * Another automation (`holder`: which one, as the caller may name it) has the very trigger asked
 * for on the account: Composio keeps one trigger per account and configuration. A Gmail filter is
 * part of that configuration (it becomes the trigger's search); any other app's filter is applied
 * by the broker to what arrives, so a different one does not make another trigger.
 */
export function duplicateTrigger(holder: string, toolkit: string, account: 'this account' | 'that account') {
  const same =
    toolkit === 'gmail'
      ? 'the same filter and config'
      : 'the same config (another filter does not make another trigger: the broker applies it)';
  const change = toolkit === 'gmail' ? 'change the filter or config' : 'change the config';
  return conflict(
    `${holder} already has this trigger on ${account} with ${same}; ${change}, or reuse that automation`,
    'trigger_duplicate',
  );
}
