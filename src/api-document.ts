import { buildApp } from './app.js';
import { systemClock } from './clock.js';
import { gatewayForProject } from './composio/index.js';
import { loadConfig } from './config.js';
import { openDatabase } from './db/database.js';
import { apiDocument } from './docs/openapi.js';
import { createEventsRuntime } from './events/runtime.js';
import { createLogger } from './logger.js';

/**
 * The API reference the routes declare, built without a database or network: the app is
 * assembled around a database pool and a Composio gateway that are never used (postgres.js
 * and the gateway connect on a first query or call, and no request is made here), and its
 * events runtime does not open its LISTEN connection when the app gets ready.
 */
export async function generateApiDocument(): Promise<string> {
  const config = loadConfig({});
  const logger = createLogger('silent');
  const database = openDatabase({ url: 'postgres://unused@127.0.0.1:9/unused', poolSize: 1, logger });
  const composio = gatewayForProject({ ...config.composio, apiKey: 'ak_unused', baseUrl: 'http://127.0.0.1:9' }, logger);
  const events = { ...createEventsRuntime({ database, logger }), start: async () => {} };
  const app = await buildApp({ config, database, logger, clock: systemClock, composio, events });
  try {
    await app.ready();
    return apiDocument(app);
  } finally {
    await app.close();
    await database.close();
  }
}
