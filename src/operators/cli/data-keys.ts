import { dataKeysStatus, MissingDataKeys, missingKeyIds } from '../../data-keys/in-use.js';
import { DEFAULT_ROTATION_BATCH, rotateEventData } from '../../events/rotation.js';
import { type Command, CommandFailed, cliConfig, cliDataKeys, parseOptions, wholeNumberOption } from './command.js';
import { cliLogger, describeTarget, withBrokerDatabase } from './database.js';

export const dataKeysStatusCommand: Command = {
  name: 'data-keys status',
  summary: 'how many stored values each data key protects, and how many are in clear',
  usage: `Usage: npm run cli -- data-keys status [--json]

Counts the stored values by what protects them: events' data encrypted under each key id,
events in clear (the broker's own and test events, and trigger events stored before encryption or
beside a broker of the previous release), the webhook signing secrets under each key and in clear, and the
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
      ...Object.entries(status.sealedWebhookSecrets).map(([id, n]) => `  webhook signing secrets encrypted under ${id}: ${n}`),
      `  webhook signing secrets in clear: ${status.clearWebhookSecrets}`,
      `  key ids recorded in use: ${status.keysInUse.join(', ') || 'none'}`,
    ];
    io.out(`${lines.join('\n')}\n`);
    return 0;
  },
};

export const dataKeysRotateCommand: Command = {
  name: 'data-keys rotate',
  summary: 'encrypt every stored event and webhook secret under the first data key, while brokers serve',
  usage: `Usage: npm run cli -- data-keys rotate [--batch N]

Encrypts every queued event's data, and every webhook signing secret, under the first key of DATA_ENCRYPTION_KEYS (the key file in
DATA_DIR for the embedded default): data under another key is decrypted and encrypted again, data
stored in clear (trigger events stored before encryption, the broker's own and test events) is
encrypted (not while a broker of the previous release is connected, which reads only clear data). Safe while brokers serve: N rows a transaction (500 by default), each written
only if unchanged since it was read; killed, run it again and it goes on with what is left.
Progress on stderr. Give every broker the new key first (in front: it encrypts, the others still
decrypt) and restart them, then rotate: a key no stored value is under any more is taken out of
the keys in use, and brokers may then be started without it.

Exits 0 when every event is under the first key; 1 when some could not be decrypted (a
key not given) or stay in clear (a broker of the previous release is connected).`,

  async run(args, io, env) {
    const { values } = parseOptions(args, { batch: { type: 'string' } });
    const batchSize = values.batch === undefined ? DEFAULT_ROTATION_BATCH : wholeNumberOption(values.batch, '--batch', 100_000);
    const config = cliConfig(env);
    const keys = cliDataKeys(config);
    if (!keys) throw new CommandFailed('DATA_ENCRYPTION_KEYS is not set: give the command the brokers’ keys, the new one first');
    const result = await withBrokerDatabase(config, cliLogger(config, io), async (database) => {
      const missing = await missingKeyIds(database.sql, keys);
      if (missing.length > 0) throw new CommandFailed(new MissingDataKeys(missing).message);
      io.err(`rotating events' data to the key ${keys.current.id} in ${describeTarget(config)}…\n`);
      return rotateEventData(database.sql, keys, {
        batchSize,
        onBatch: (_, total) =>
          io.err(`  ${total.resealed} encrypted again, ${total.sealedFromClear} encrypted from clear, ${total.unreadable} not decrypted\n`),
      });
    });
    const lines = [
      `events' data under ${keys.current.id}: ${result.resealed} encrypted again, ${result.sealedFromClear} encrypted from clear`,
      ...(result.retired.length > 0
        ? [`key ids no longer in use: ${result.retired.join(', ')} (brokers may now be started without them)`]
        : []),
      ...(result.unreadable > 0 ? [`${result.unreadable} could not be decrypted with the keys given: left as they are`] : []),
      ...(result.leftInClear > 0
        ? [`${result.leftInClear} left in clear: a broker of the previous release is connected; run again after the roll`]
        : []),
    ];
    io.out(`${lines.join('\n')}\n`);
    return result.unreadable > 0 || result.leftInClear > 0 ? 1 : 0;
  },
};
