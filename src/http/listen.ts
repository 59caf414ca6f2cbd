import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';

/** Ports tried in all when the broker chose its port itself (see `listenOn`). */
export const CHOSEN_PORT_ATTEMPTS = 5;

export interface ListenOptions {
  readonly port: number;
  readonly host: string;
  /** The settings the port and host come from, named when the broker cannot listen; `PORT` and `HOST` by default. */
  readonly settings?: { readonly port: string; readonly host: string };
  /**
   * Present when the broker chose `port` itself (`PORT=0` in sandbox mode, where the simulator
   * must know the broker's address before the broker listens): names another free port, having
   * done what the move needs (the simulator's webhooks pointed at it); each move is logged.
   */
  readonly choosePortAgain?: { readonly next: () => Promise<number>; readonly logger: Logger };
}

/**
 * The broker's server listening, its address answered. Another process may take a port the
 * broker chose itself between the choice and the listen: the broker then moves to another, a few
 * times at most, as the embedded Postgres does with its own. A port the operator set that is in
 * use, or a host that is not this machine's, is refused at once (`ListenError`, which says what to
 * change).
 */
export async function listenOn(app: FastifyInstance, options: ListenOptions): Promise<string> {
  const settings = options.settings ?? { port: 'PORT', host: 'HOST' };
  const again = options.choosePortAgain;
  let port = options.port;
  for (let attempt = 1; ; attempt++) {
    try {
      return await app.listen({ port, host: options.host });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EADDRNOTAVAIL') {
        throw new ListenError(
          `${settings.host} ${options.host} is not an address of this machine (or not yet); set ${settings.host} to one of its addresses, or 0.0.0.0 for all`,
          { cause: error },
        );
      }
      if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw error;
      if (!again) {
        throw new ListenError(
          `${settings.port} ${port} on ${settings.host} ${options.host} is in use by another process; set ${settings.port} to a free port`,
          { cause: error },
        );
      }
      if (attempt >= CHOSEN_PORT_ATTEMPTS) {
        throw new ListenError(
          `each of the ${attempt} ports chosen for ${settings.port}=0 on ${settings.host} ${options.host} was taken by another process before the broker could listen; set ${settings.port} to a free port`,
          { cause: error },
        );
      }
      const taken = port;
      port = await again.next();
      again.logger.warn(
        { port: taken, next: port, attempt },
        'the port chosen for the broker was taken before it listened; trying another',
      );
    }
  }
}

/**
 * The broker could not listen where it was told: the port is another process's, or the host is
 * not (yet) an address of this machine. Said as what to change; either may pass (exit 1).
 */
export class ListenError extends Error {
  override readonly name = 'ListenError';
}
