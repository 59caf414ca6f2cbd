import { type ComposioGateway, gatewayForProject } from '../../composio/index.js';
import type { Config } from '../../config.js';
import { recordAudit } from '../audit.js';
import { type CliIo, type Command, CommandFailed, cliConfig, cliOperator, parseOptions } from './command.js';
import { cliLogger, withBrokerDatabase } from './database.js';

/** The project's webhook subscription lives on Composio; these commands need the real key. */
function gatewayFor(config: Config, io: CliIo): { composio: ComposioGateway; webhookUrl: string } {
  if (!config.composio.apiKey) throw new CommandFailed('COMPOSIO_API_KEY is not set: the sandbox simulator subscribes by itself');
  if (!config.publicUrl) throw new CommandFailed('PUBLIC_URL is not set: it says where Composio reaches the brokers');
  const composio = gatewayForProject({ ...config.composio, apiKey: config.composio.apiKey }, cliLogger(config, io));
  return { composio, webhookUrl: `${config.publicUrl}/v1/webhooks/composio` };
}

function printSecret(io: CliIo, secret: string, note: string): void {
  io.out(`${secret}\n`);
  io.err(note);
}

export const webhookSubscribe: Command = {
  name: 'webhook subscribe',
  summary: "point the Composio project's webhooks at PUBLIC_URL/v1/webhooks/composio",
  usage: `Usage: npm run cli -- webhook subscribe

Creates or updates the project's one webhook subscription (V3; trigger messages and expired
accounts) to deliver to PUBLIC_URL/v1/webhooks/composio. When Composio answers with the signing
secret it is printed on stdout: put it in COMPOSIO_WEBHOOK_SECRET on every broker.
Needs COMPOSIO_API_KEY and PUBLIC_URL.`,

  async run(args, io, env) {
    parseOptions(args, {});
    const { composio, webhookUrl } = gatewayFor(cliConfig(env), io);
    const subscription = await composio.setWebhookSubscription(webhookUrl);
    if (subscription.secret) {
      printSecret(io, subscription.secret, `subscription ${subscription.id} delivers to ${webhookUrl}; its signing secret is above\n`);
    } else {
      io.err(`subscription ${subscription.id} delivers to ${webhookUrl}; Composio did not show its secret (use "webhook rotate-secret")\n`);
    }
    return 0;
  },
};

export const webhookRotateSecret: Command = {
  name: 'webhook rotate-secret',
  summary: "give the project's webhook subscription a new signing secret",
  usage: `Usage: npm run cli -- webhook rotate-secret [--as NAME]

  --as NAME       who you are, for the audit trail (default: your login name)

Asks Composio for a new signing secret for the project's webhook subscription and prints it on
stdout. Then set COMPOSIO_WEBHOOK_SECRET="<new>,<old>" on every broker (both are accepted), roll
them, and later drop the old one. Needs COMPOSIO_API_KEY and PUBLIC_URL. With DATABASE_URL
set, the rotation is recorded in the audit trail (never the secret).`,

  async run(args, io, env) {
    const { values } = parseOptions(args, { as: { type: 'string' } });
    const operator = cliOperator(values.as, env);
    const config = cliConfig(env);
    const { composio, webhookUrl } = gatewayFor(config, io);
    const subscription = await composio.setWebhookSubscription(webhookUrl);
    const { secret } = await composio.rotateWebhookSecret(subscription.id);
    // The rotation happened on Composio; the record follows it (only the broker's own changes
    // can share a transaction with their row).
    if (config.databaseUrl) {
      await withBrokerDatabase(config, cliLogger(config, io), (database) =>
        recordAudit(
          database.db,
          { operator, tokenId: null, source: 'cli' },
          { action: 'webhook.rotate-secret', target: subscription.id, outcome: 'rotated' },
          new Date(),
        ),
      );
    } else {
      io.err('not recorded in the audit trail: DATABASE_URL is not set\n');
    }
    printSecret(
      io,
      secret,
      `new signing secret for subscription ${subscription.id} above; configure COMPOSIO_WEBHOOK_SECRET="<new>,<old>" on every broker now\n`,
    );
    return 0;
  },
};
