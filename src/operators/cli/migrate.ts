import { type Command, cliConfig, parseOptions } from './command.js';
import { cliLogger, describeTarget, withBrokerDatabase } from './database.js';

export const migrate: Command = {
  name: 'migrate',
  summary: 'apply the database migrations (the broker also does this at start)',
  usage: `Usage: npm run cli -- migrate

Applies migrations/ to DATABASE_URL, or to the embedded Postgres in DATA_DIR when DATABASE_URL
is unset (started for the command and stopped after; refused while a broker runs on it).
Safe beside running brokers on a shared database: migrations take an advisory lock.`,

  async run(args, io, env) {
    parseOptions(args, {});
    const config = cliConfig(env);
    await withBrokerDatabase(config, cliLogger(config, io), async () => {});
    io.out(`migrations applied to ${describeTarget(config)}\n`);
    return 0;
  },
};
