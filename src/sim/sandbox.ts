import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type postgres from 'postgres';
import { createComposioGateway } from '../composio/index.js';
import type { TriggerOwner } from './context.js';
import { createSimPersistence } from './persistence.js';
import { type Simulator, startSimulator } from './server.js';

/**
 * Sandbox mode (no `COMPOSIO_API_KEY`): the broker runs against its own Composio simulator.
 * The webhook subscription is created through the real adapter and SDK, so the signing secret
 * the broker verifies with is the one the simulator answered — the same path as production.
 * The simulator keeps its world in the broker's Postgres (schema `sandbox`), project key
 * included, so accounts, Sessions, triggers and consent links outlive a restart.
 */
export interface Sandbox {
  readonly apiKey: string;
  /** The simulator's origin: the Composio base URL for the broker. */
  readonly baseUrl: string;
  readonly webhookSecret: string;
  readonly simulator: Simulator;
  /** Whether the simulator took up a world kept by an earlier run. */
  readonly restored: boolean;
  /** One clear banner saying that this is the sandbox, and where its pages are. */
  readonly bannerLines: string[];
  /**
   * Points the webhook subscription at another address of the broker's (the port it chose was
   * taken before it could listen). The signing secret stays the same.
   */
  deliverTo(brokerWebhookUrl: string): Promise<void>;
  close(): Promise<void>;
}

export async function startSandbox(options: {
  logger: Logger;
  /** Where the simulator delivers signed webhooks: the broker's `/v1/webhooks/composio`. */
  brokerWebhookUrl: string;
  port?: number;
  /** Where the simulator listens; loopback unless a container publishes its port. */
  host?: string;
  /** The broker's database, where the simulator's world is kept. */
  sql: postgres.Sql;
  /** Names each trigger's installation and automation on the simulator's page. */
  describeTriggers?: (composioTriggerIds: string[]) => Promise<ReadonlyMap<string, TriggerOwner>>;
}): Promise<Sandbox> {
  const persistence = createSimPersistence(options.sql, (err) =>
    options.logger.error({ err, component: 'composio-simulator' }, 'could not keep the simulator state'),
  );
  const kept = await persistence.load();
  const apiKey = kept?.apiKey ?? `sim_${randomBytes(24).toString('base64url')}`;
  let simulator: Simulator;
  try {
    simulator = await startSimulator({
      apiKey,
      persistence,
      ...(kept ? { restore: kept } : {}),
      ...(options.describeTriggers ? { describeTriggers: options.describeTriggers } : {}),
      ...(options.port !== undefined ? { port: options.port } : {}),
      ...(options.host !== undefined ? { host: options.host } : {}),
      // Per-request logs of the simulator would drown the broker's own; keep its warnings.
      logger: options.logger.child({ component: 'composio-simulator' }, { level: 'warn' }),
    });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EADDRINUSE') {
      throw new Error(`the sandbox simulator's port ${options.port} is in use; set SANDBOX_PORT to a free port`, { cause: error });
    }
    throw error;
  }
  try {
    const gateway = createComposioGateway({
      apiKey,
      baseUrl: simulator.origin,
      callsPerMinute: 600,
      timeoutMs: 10_000,
      logger: options.logger,
    });
    const subscription = await gateway.setWebhookSubscription(options.brokerWebhookUrl);
    // A kept world already has its subscription, whose secret the API answers only masked (as
    // Composio's does): the sandbox is the simulator, so it reads the secret it signs with.
    const webhookSecret = subscription.secret ?? (subscription.created ? undefined : simulator.controls.webhookSecret(subscription.id));
    if (!webhookSecret) throw new Error('the Composio simulator answered without a webhook signing secret');
    const rule = '='.repeat(78);
    return {
      apiKey,
      baseUrl: simulator.origin,
      webhookSecret,
      simulator,
      restored: kept !== null,
      bannerLines: [
        rule,
        'SANDBOX MODE: no COMPOSIO_API_KEY is set, so the broker talks to its built-in',
        'Composio simulator. Nothing reaches Composio or any real app.',
        `  Simulator (Composio API):  ${simulator.origin}`,
        `  Consent pages & controls:  ${simulator.origin}/_sim`,
        `  Project key (to rehearse the webhook CLI): shown at ${simulator.origin}/_sim`,
        `  Webhooks are signed and delivered to: ${options.brokerWebhookUrl}`,
        'Connect an app through the broker, then open the consent link it returns',
        '(or the list at /_sim) and press Authorize.',
        'Set COMPOSIO_API_KEY and COMPOSIO_WEBHOOK_SECRET to use the real Composio.',
        rule,
      ],
      async deliverTo(brokerWebhookUrl) {
        await gateway.setWebhookSubscription(brokerWebhookUrl);
      },
      close: () => simulator.close(),
    };
  } catch (error) {
    await simulator.close();
    throw error;
  }
}
