import { dataKeysStatus } from '../../data-keys/in-use.js';
import { type Command, cliConfig, parseOptions } from './command.js';
import { cliLogger, describeTarget, withBrokerDatabase } from './database.js';

export const dataKeysStatusCommand: Command = {
  name: 'data-keys status',
  summary: 'how many stored values each data key protects, and how many are in clear',
  usage: `Usage: npm run cli -- data-keys status [--json]

Counts the stored values by what protects them: trigger events' data encrypted under each key id,
events in clear (the broker's own and test events, and trigger events stored before encryption or
beside a broker of the previous release), the webhook signing secrets (stored in clear), and the
key ids recorded in use (a broker started without one of them refuses to start). Reads every event
kept: an operator's command, run when needed. Needs no keys.`,

  async run(args, io, env) {
    const { values } = parseOptions(args, { json: { type: 'boolean' } });
    const config = cliConfig(env);
    const status = await withBrokerDatabase(config, cliLogger(config, io), (database) => dataKeysStatus(database.sql));
    if (values.json) {
      io.out(`${JSON.stringify(status)}\n`);
      return 0;
    }
    const lines = [
      `data keys in ${describeTarget(config)}`,
      ...Object.entries(status.sealedEvents).map(([id, n]) => `  events encrypted under ${id}: ${n}`),
      `  events in clear: ${status.clearEvents}`,
      `  webhook signing secrets in clear: ${status.clearWebhookSecrets}`,
      `  key ids recorded in use: ${status.keysInUse.join(', ') || 'none'}`,
    ];
    io.out(`${lines.join('\n')}\n`);
    return 0;
  },
};
