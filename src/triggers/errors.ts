import { conflict, notFound } from '../errors.js';
import { filterIsComposioConfig } from './composio-config.js';

/** One answer for a trigger id that is unknown, malformed or another installation's. */
export const triggerNotFound = () => notFound('no trigger with this id', 'trigger_not_found');

/**
 * Another automation (`holder`: which one, as the caller may name it) has the very trigger asked
 * for on the account: Composio keeps one trigger per account and configuration, which holds the
 * filter only where it becomes part of it (`filterIsComposioConfig`).
 */
export function duplicateTrigger(holder: string, toolkit: string, account: 'this account' | 'that account') {
  const [same, change] = filterIsComposioConfig(toolkit)
    ? ['the same filter and config', 'change the filter or config']
    : ['the same config (another filter does not make another trigger: the broker applies it)', 'change the config'];
  return conflict(
    `${holder} already has this trigger on ${account} with ${same}; ${change}, or reuse that automation`,
    'trigger_duplicate',
  );
}
