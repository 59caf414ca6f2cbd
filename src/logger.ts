import { type DestinationStream, type Logger, pino } from 'pino';

/**
 * Everything that could carry a credential, wherever it appears in a log object. Tokens,
 * project keys, webhook secrets and grants are never written, whatever the level.
 */
export const REDACTED_PATHS = [
  'authorization',
  'token',
  'grant',
  'secret',
  'apiKey',
  '*.authorization',
  '*.token',
  '*.grant',
  '*.secret',
  '*.secrets',
  '*.apiKey',
  '*.password',
  '*["x-api-key"]',
  '*["webhook-signature"]',
  '*.headers.authorization',
  '*.headers.cookie',
  '*.headers["x-api-key"]',
  '*.headers["webhook-signature"]',
  'req.headers',
  'res.headers',
];

export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'omb-broker' },
      redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    destination,
  );
}
