import type ComposioClient from '@composio/client';
import { Composio } from '@composio/core';
import type { Logger } from 'pino';

export type Sdk = Composio;
export type Client = ComposioClient;

/**
 * The SDK, configured for a server that shares one project between many people:
 * - explicit key and base URL, so neither the environment nor `~/.composio` is consulted;
 * - no telemetry and no npm version check (no calls anywhere but Composio);
 * - no automatic retries, and one request timeout.
 *
 * Retries: core never forwards `maxRetries`/`timeout` to its client, and its models all hold
 * the one client `getClient()` returns. That client reads its public `maxRetries` and
 * `timeout` fields on every request, so setting them here reaches every core call and every
 * direct client call. Without this, a 429 or 409 is sent two more times within milliseconds
 * (`retry-after: 0`) — exactly the hammering an organisation-wide rate limit punishes. The
 * broker's own call budget decides when to call again.
 */
export function createSdk(options: { apiKey: string; baseUrl: string; timeoutMs: number; logger: Logger }): {
  sdk: Sdk;
  client: Client;
} {
  const log = options.logger;
  const sdk = new Composio({
    apiKey: options.apiKey,
    baseURL: options.baseUrl,
    allowTracking: false,
    disableVersionCheck: true,
    // The SDK logger is process-wide; its messages are already redacted by the SDK.
    logger: {
      error: (...args: unknown[]) => log.error({ source: 'composio-sdk' }, args.map(String).join(' ')),
      warn: (...args: unknown[]) => log.warn({ source: 'composio-sdk' }, args.map(String).join(' ')),
      info: (...args: unknown[]) => log.debug({ source: 'composio-sdk' }, args.map(String).join(' ')),
      debug: (...args: unknown[]) => log.trace({ source: 'composio-sdk' }, args.map(String).join(' ')),
    },
    logLevel: 'warn',
  });
  const client = sdk.getClient();
  client.maxRetries = 0;
  client.timeout = options.timeoutMs;
  return { sdk, client };
}
