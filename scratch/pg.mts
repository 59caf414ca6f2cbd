import { mkdtemp } from 'node:fs/promises';
import { startEmbeddedPostgres } from '../src/db/embedded.ts';
import { createLogger } from '../src/logger.ts';
const dataDir = await mkdtemp('/dev/shm/omb-pg-');
const server = await startEmbeddedPostgres({ dataDir, logger: createLogger('warn'), database: 'postgres', extraFlags: ['-c','fsync=off'] });
console.log(server.url);
process.on('SIGTERM', async () => { await server.stop(); process.exit(0); });
setInterval(() => {}, 1e6);
