import { systemClock } from '../../clock.js';
import { type ComposioGateway, gatewayForProject } from '../../composio/index.js';
import type { Config } from '../../config.js';
import type { Rotation } from '../../events/intake/webhook-secrets.js';
import { rotateSecret, type SecretRotation } from '../actions.js';
import { type CliIo, type Command, CommandFailed, cliConfig, cliDataKeys, cliOperator, parseOptions, UsageError } from './command.js';
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

const OPTIONS = { 'keep-old-for': { type: 'string' }, as: { type: 'string' } } as const;

export const webhookSubscribe: Command = {
  name: 'webhook subscribe',
  summary: "point the Composio project's webhooks at PUBLIC_URL/v1/webhooks/composio",
  usage: `Usage: npm run cli -- webhook subscribe [--keep-old-for 24h] [--as NAME]

Creates the project's one webhook subscription (V3; trigger messages, expired accounts and
triggers Composio disabled), or updates the one there is, to deliver to
PUBLIC_URL/v1/webhooks/composio. Composio shows a
subscription's signing secret in full only when it makes one (create, rotate) and masked in every
other answer, so the secret printed on stdout is always one Composio has just made, and stderr
says how it was obtained:
  - created: the secret the creation answered; put it in COMPOSIO_WEBHOOK_SECRET on every broker.
  - updated: the secret is rotated as "webhook rotate-secret" does: every broker accepts the new
    one at once (through the database), the ones accepted until now for --keep-old-for more.

  --keep-old-for  when an existing subscription's secret is rotated: how long the old secrets
                  stay accepted (default 24h, at most 30d)

Needs COMPOSIO_API_KEY and PUBLIC_URL, and for an existing subscription the brokers' database,
found as "webhook rotate-secret" finds it. COMPOSIO_WEBHOOK_SECRET is neither needed nor read.`,

  async run(args, io, env) {
    const { values } = parseOptions(args, OPTIONS);
    const keepOldForMs = overlapMs(values['keep-old-for'] ?? '24h');
    const operator = cliOperator(values.as, env);
    const config = cliConfig(env);
    const { composio, webhookUrl } = gatewayFor(config, io);
    const subscription = await composio.setWebhookSubscription(webhookUrl);
    if (subscription.secret) {
      printSecret(
        io,
        subscription.secret,
        `subscription ${subscription.id} created; it delivers to ${webhookUrl}. The signing secret above came with its creation: ` +
          'put it in COMPOSIO_WEBHOOK_SECRET on every broker\n',
      );
      return 0;
    }
    // What Composio answered for the secret is a mask (or nothing): a real one only comes from a rotation.
    io.err(
      `subscription ${subscription.id} ${subscription.created ? 'created' : 'updated'}; it delivers to ${webhookUrl}. ` +
        'Composio shows its secret only masked, so a new one is obtained by rotating it (rotate_secret)\n',
    );
    // Already pointed at the URL a moment ago: the rotation need not set it again.
    const known = {
      setWebhookSubscription: async () => subscription,
      rotateWebhookSecret: (id: string) => composio.rotateWebhookSecret(id),
    };
    const rotation = await rotateThroughDatabase(config, io, operator, { composio: known, webhookUrl, keepOldForMs });
    printSecret(io, rotation.secret, rotatedNote(rotation));
    return 0;
  },
};

/** `--keep-old-for`: a number and a unit, `s`, `m`, `h` or `d` (`90m`, `24h`, `2d`). */
function overlapMs(value: string): number {
  const match = /^(\d+(?:\.\d+)?)\s*(s|m|h|d)$/.exec(value.trim());
  const unit = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
  const ms = match ? Number(match[1]) * unit[match[2] as keyof typeof unit] : Number.NaN;
  if (!Number.isFinite(ms) || ms <= 0 || ms > 30 * 86_400_000) {
    throw new UsageError('--keep-old-for must be a duration such as 30m, 24h or 2d (above 0, at most 30d)');
  }
  return ms;
}

export const webhookRotateSecret: Command = {
  name: 'webhook rotate-secret',
  summary: "give the project's webhook subscription a new signing secret, with no delivery refused",
  usage: `Usage: npm run cli -- webhook rotate-secret [--keep-old-for 24h] [--as NAME]

Rotates the signing secret of the project's webhook subscription while every broker keeps
running, and refuses no delivery:
  1. tells every broker (through the database) that a rotation is under way, so a delivery
     signed with the secret Composio is about to make is held, not refused, until step 3;
  2. asks Composio for the new secret;
  3. stores it as accepted in the database (every broker follows within a second), and gives
     every secret the brokers accepted until now (the stored ones, each broker's own
     COMPOSIO_WEBHOOK_SECRET among them: a broker stores those at start) an end --keep-old-for
     later, after which they are refused by themselves. Nothing else is stored: the command
     never takes a secret from its own environment.
Nothing needs restarting; COMPOSIO_WEBHOOK_SECRET may keep its old value on the brokers, and the
command needs none. The new secret is printed on stdout (keep it as a spare; the brokers already
have it).

  --keep-old-for  how long deliveries signed with the old secret stay accepted: 30m, 24h, 2d
                  (default 24h, at most 30d)

Needs COMPOSIO_API_KEY, PUBLIC_URL and the brokers' database (DATABASE_URL, or DATA_DIR's
embedded Postgres while no broker runs on it). Given the brokers' data keys
(DATA_ENCRYPTION_KEYS; the embedded default's key file is found in DATA_DIR), the new secret is
stored encrypted from the first, never in clear.`,

  async run(args, io, env) {
    const { values } = parseOptions(args, OPTIONS);
    const keepOldForMs = overlapMs(values['keep-old-for'] ?? '24h');
    const operator = cliOperator(values.as, env);
    const config = cliConfig(env);
    const { composio, webhookUrl } = gatewayFor(config, io);
    const rotation = await rotateThroughDatabase(config, io, operator, { composio, webhookUrl, keepOldForMs });
    printSecret(io, rotation.secret, rotatedNote(rotation));
    return 0;
  },
};

/** The rotation (`rotateSecret`), against the brokers' database: only the secret Composio answers is added. */
function rotateThroughDatabase(config: Config, io: CliIo, operator: string, rotation: SecretRotation): Promise<Rotation> {
  // With the brokers' data keys, the new secret can be stored encrypted from the first.
  const keys = cliDataKeys(config);
  return withBrokerDatabase(config, cliLogger(config, io), (database) =>
    rotateSecret({ database, clock: systemClock }, { operator, tokenId: null, source: 'cli' }, { ...rotation, ...(keys ? { keys } : {}) }),
  );
}

function rotatedNote(rotation: Rotation): string {
  return (
    `new signing secret for subscription ${rotation.subscriptionId} above, from rotate_secret: every broker accepts it now; ` +
    `the old ones are accepted until ${rotation.oldExpireAt.toISOString()}. ` +
    (rotation.storedEncrypted
      ? 'It was stored encrypted under the data key the brokers use\n'
      : 'It was stored in clear, and the brokers encrypt it at their next read (given the brokers’ data keys, this command stores it encrypted)\n')
  );
}
