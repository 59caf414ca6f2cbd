import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';

/** Ports tried in all when the broker chose its port itself (see `listenOn`). */
export const CHOSEN_PORT_ATTEMPTS = 5;

export interface ListenOptions {
  readonly port: number;
  readonly host: string;
  readonly logger: Logger;
  /**
   * Present when the broker chose `port` itself (`PORT=0` in sandbox mode, where the simulator
   * must know the broker's address before the broker listens): names another free port, having
   * done what the move needs (the simulator's webhooks pointed at it).
   */
  readonly choosePortAgain?: () => Promise<number>;
}

/**
 * The broker's server listening, its address answered. Another process may take a port the
 * broker chose itself between the choice and the listen: the broker then moves to another, a few
 * times at most, as the embedded Postgres does with its own. A port the operator set that is in
 * use is refused at once (`PortInUseError`, which says what to change).
 */
export async function listenOn(app: FastifyInstance, options: ListenOptions): Promise<string> {
  let port = options.port;
  for (let attempt = 1; ; attempt++) {
    try {
      return await app.listen({ port, host: options.host });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw error;
      if (!options.choosePortAgain) {
        throw new PortInUseError(`PORT ${port} on HOST ${options.host} is in use by another process; set PORT to a free port`, {
          cause: error,
        });
      }
      if (attempt >= CHOSEN_PORT_ATTEMPTS) {
        throw new PortInUseError(
          `each of the ${attempt} ports chosen for PORT=0 on HOST ${options.host} was taken by another process before the broker could listen; set PORT to a free port`,
          { cause: error },
        );
      }
      const taken = port;
      port = await options.choosePortAgain();
      options.logger.warn(
        { port: taken, next: port, attempt },
        'the port chosen for the broker was taken before it listened; trying another',
      );
    }
  }
}

/** The broker could not listen: its port is another process's. Said as what to change. */
export class PortInUseError extends Error {
  override readonly name = 'PortInUseError';
}
