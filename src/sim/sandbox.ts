import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { createComposioGateway } from '../composio/index.js';
import { type Simulator, startSimulator } from './server.js';

/**
 * Sandbox mode (no `COMPOSIO_API_KEY`): the broker runs against its own Composio simulator.
 * The webhook subscription is created through the real adapter and SDK, so the signing secret
 * the broker verifies with is the one the simulator answered — the same path as production.
 */
export interface Sandbox {
  readonly apiKey: string;
  /** The simulator's origin: the Composio base URL for the broker. */
  readonly baseUrl: string;
  readonly webhookSecret: string;
  readonly simulator: Simulator;
  /** One clear banner saying that this is the sandbox, and where its pages are. */
  readonly bannerLines: string[];
  close(): Promise<void>;
}

export async function startSandbox(options: {
  logger: Logger;
  /** Where the simulator delivers signed webhooks: the broker's `/v1/webhooks/composio`. */
  brokerWebhookUrl: string;
  port?: number;
  /** Where the simulator listens; loopback unless a container publishes its port. */
  host?: string;
}): Promise<Sandbox> {
  const apiKey = `sim_${randomBytes(24).toString('base64url')}`;
  const simulator = await startSimulator({
    apiKey,
    ...(options.port !== undefined ? { port: options.port } : {}),
    ...(options.host !== undefined ? { host: options.host } : {}),
    // Per-request logs of the simulator would drown the broker's own; keep its warnings.
    logger: options.logger.child({ component: 'composio-simulator' }, { level: 'warn' }),
  });
  try {
    const gateway = createComposioGateway({
      apiKey,
      baseUrl: simulator.origin,
      callsPerMinute: 600,
      timeoutMs: 10_000,
      logger: options.logger,
    });
    const subscription = await gateway.setWebhookSubscription(options.brokerWebhookUrl);
    if (!subscription.secret) throw new Error('the Composio simulator answered without a webhook signing secret');
    const rule = '='.repeat(78);
    return {
      apiKey,
      baseUrl: simulator.origin,
      webhookSecret: subscription.secret,
      simulator,
      bannerLines: [
        rule,
        'SANDBOX MODE: no COMPOSIO_API_KEY is set, so the broker talks to its built-in',
        'Composio simulator. Nothing reaches Composio or any real app.',
        `  Simulator (Composio API):  ${simulator.origin}`,
        `  Consent pages & controls:  ${simulator.origin}/_sim`,
        `  Webhooks are signed and delivered to: ${options.brokerWebhookUrl}`,
        'Connect an app through the broker, then open the consent link it returns',
        '(or the list at /_sim) and press Authorize.',
        'Set COMPOSIO_API_KEY and COMPOSIO_WEBHOOK_SECRET to use the real Composio.',
        rule,
      ],
      close: () => simulator.close(),
    };
  } catch (error) {
    await simulator.close();
    throw error;
  }
}
