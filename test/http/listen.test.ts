import { createServer, type Server } from 'node:net';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort } from '../../src/db/embedded.js';
import { CHOSEN_PORT_ATTEMPTS, ListenError, listenOn } from '../../src/http/listen.js';
import { createLogger } from '../../src/logger.js';
import { LogCapture } from '../support/app.js';

const servers: Server[] = [];
const apps: FastifyInstance[] = [];
afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()));
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

async function app(): Promise<FastifyInstance> {
  const made = Fastify();
  made.get('/', async () => ({ here: true }));
  apps.push(made);
  return made;
}

/** A port another process's server holds (closed after each test). */
async function occupied(): Promise<number> {
  const port = await freePort();
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  servers.push(server);
  return port;
}

describe('listening', () => {
  it('moves from a port it chose that another process took first to another one, and says so', async () => {
    const first = await occupied();
    const second = await occupied();
    const free = await freePort();
    const logs = new LogCapture();
    const offered = [second, free];
    const url = await listenOn(await app(), {
      port: first,
      host: '127.0.0.1',
      choosePortAgain: { next: async () => offered.shift()!, logger: createLogger('info', logs) },
    });
    expect(url).toBe(`http://127.0.0.1:${free}`);
    expect(offered).toEqual([]);
    expect(await (await fetch(url)).json()).toEqual({ here: true });
    const warnings = logs.lines.map((line) => JSON.parse(line)).filter((line) => line.level === 40);
    expect(warnings).toMatchObject([
      { port: first, next: second, attempt: 1, msg: 'the port chosen for the broker was taken before it listened; trying another' },
      { port: second, next: free, attempt: 2 },
    ]);
  });

  it('refuses a port the operator set that is in use, saying what to change, without trying another', async () => {
    const port = await occupied();
    const server = await app();
    const error = await listenOn(server, { port, host: '127.0.0.1' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ListenError);
    expect((error as Error).message).toBe(`PORT ${port} on HOST 127.0.0.1 is in use by another process; set PORT to a free port`);
    expect(server.server.listening).toBe(false);
  });

  it(`gives up after ${CHOSEN_PORT_ATTEMPTS} ports it chose were all taken first`, async () => {
    let asked = 0;
    const first = await occupied();
    const server = await app();
    const error = await listenOn(server, {
      port: first,
      host: '127.0.0.1',
      choosePortAgain: {
        next: async () => {
          asked += 1;
          return occupied();
        },
        logger: createLogger('silent'),
      },
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ListenError);
    expect((error as Error).message).toBe(
      `each of the ${CHOSEN_PORT_ATTEMPTS} ports chosen for PORT=0 on HOST 127.0.0.1 was taken by another process before the broker could listen; set PORT to a free port`,
    );
    expect(asked).toBe(CHOSEN_PORT_ATTEMPTS - 1);
    expect(server.server.listening).toBe(false);
  });

  it('refuses a host that is not an address of this machine, naming the setting', async () => {
    // 192.0.2.1: an address kept for documentation, never a machine's.
    const error = await listenOn(await app(), { port: 0, host: '192.0.2.1' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ListenError);
    expect((error as Error).message).toBe(
      'HOST 192.0.2.1 is not an address of this machine (or not yet); set HOST to one of its addresses, or 0.0.0.0 for all',
    );
  });

  it('names the settings the port and host came from', async () => {
    const port = await occupied();
    const error = await listenOn(await app(), {
      port,
      host: '127.0.0.1',
      settings: { port: 'METRICS_PORT', host: 'METRICS_HOST' },
    }).catch((e: unknown) => e);
    expect((error as Error).message).toBe(
      `METRICS_PORT ${port} on METRICS_HOST 127.0.0.1 is in use by another process; set METRICS_PORT to a free port`,
    );
  });
});
