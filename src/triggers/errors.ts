import { notFound } from '../errors.js';

/** One answer for a trigger id that is unknown, malformed or another installation's. */
export const triggerNotFound = () => notFound('no trigger with this id', 'trigger_not_found');
