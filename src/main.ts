import closeWithGrace from 'close-with-grace';
import { buildApp } from './app.js';
import { systemClock } from './clock.js';
import { ConfigError, loadConfig, type Config } from './config.js';
import { applyMigrations, openDatabase } from './db/database.js';
import { startEmbeddedPostgres, type EmbeddedDatabase } from './db/embedded.js';
import { createLogger } from './logger.js';

/** config → database → migrations → app → listen, and the reverse on the way out. */
async function main(): Promise<void> {
  let config: Config;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`omb-broker: ${error.message}\n`);
      process.exit(78);
    }
    throw error;
  }
  const logger = createLogger(config.logLevel);

  let embedded: EmbeddedDatabase | undefined;
  const closers: Array<() => Promise<unknown>> = [];
  const closeAll = async () => {
    for (const close of closers.reverse()) await close().catch((err: unknown) => logger.warn({ err }, 'close failed'));
    closers.length = 0;
  };

  try {
    let databaseUrl = config.databaseUrl;
    if (!databaseUrl) {
      embedded = await startEmbeddedPostgres({ dataDir: config.dataDir, logger });
      closers.push(() => embedded!.stop());
      databaseUrl = embedded.url;
    }
    await applyMigrations(databaseUrl, logger);
    const database = openDatabase({ url: databaseUrl, poolSize: config.databasePoolSize, logger });
    closers.push(() => database.close());

    const app = await buildApp({ config, database, logger, clock: systemClock });
    closers.push(() => app.close());

    closeWithGrace({ delay: config.shutdownGraceMs, logger }, async ({ signal, err }) => {
      if (err) logger.error({ err }, 'shutting down after an error');
      else logger.info({ signal }, 'shutting down');
      await closeAll();
    });

    const url = await app.listen({ port: config.port, host: config.host });
    logger.info({ url, database: embedded ? 'embedded' : 'DATABASE_URL' }, 'broker listening');
  } catch (error) {
    logger.fatal({ err: error }, 'broker failed to start');
    await closeAll();
    process.exit(1);
  }
}

await main();
