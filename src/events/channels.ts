/**
 * Postgres NOTIFY channels shared by every broker process. Payloads are installation ids;
 * receivers treat a notification only as a hint to read the database again.
 */

/** Something was appended to the installation's queue. */
export const EVENTS_CHANNEL = 'omb_events';

/** An operator disabled the installation: its waiting polls end with `403 installation_disabled`. */
export const INSTALLATION_DISABLED_CHANNEL = 'omb_installation_disabled';

/** The accepted webhook signing secrets changed (a rotation): every process reads them again. */
export const WEBHOOK_SECRETS_CHANNEL = 'omb_webhook_secrets';
