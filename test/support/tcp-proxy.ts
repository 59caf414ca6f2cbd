import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * A loopback TCP proxy a test can cut: `down()` stops listening and drops every connection (the
 * client sees its connections close, then connection refused), `up()` listens again on the same
 * port. Lets one process lose its database while others keep theirs. `retarget()` makes it the
 * endpoint of a database that moves: new connections go to the new target.
 */
export interface TcpProxy {
  readonly port: number;
  down(): Promise<void>;
  /**
   * Keeps every connection open and accepts new ones, but forwards nothing either way, as a
   * frozen server does (its kernel still accepts what is sent); `thaw()` forwards again.
   */
  freeze(): void;
  thaw(): void;
  up(): Promise<void>;
  /**
   * Where connections accepted from now on are forwarded (a standby promoted while the proxy is
   * down, as a managed database's endpoint moves to its new primary). Connections already open
   * stay with the old target.
   */
  retarget(target: { host: string; port: number }): void;
  close(): Promise<void>;
}

export async function startTcpProxy(initialTarget: { host: string; port: number }): Promise<TcpProxy> {
  let target = { ...initialTarget };
  const sockets = new Set<Socket>();
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  };
  let server: Server | undefined;
  let port = 0;
  let frozen = false;
  const pipes = new Set<{ from: Socket; to: Socket }>();
  const forward = (from: Socket, to: Socket) => {
    const pipe = { from, to };
    pipes.add(pipe);
    from.once('close', () => pipes.delete(pipe));
    if (!frozen) from.pipe(to);
  };

  const listen = () =>
    new Promise<void>((resolve, reject) => {
      const next = createServer((client) => {
        const upstream = connect(target.port, target.host);
        track(client);
        track(upstream);
        forward(client, upstream);
        forward(upstream, client);
        client.on('error', () => upstream.destroy());
        upstream.on('error', () => client.destroy());
        client.on('close', () => upstream.destroy());
        upstream.on('close', () => client.destroy());
      });
      next.once('error', reject);
      next.listen(port, '127.0.0.1', () => {
        const address = next.address();
        if (typeof address === 'object' && address) port = address.port;
        server = next;
        resolve();
      });
    });

  const stop = async () => {
    const current = server;
    server = undefined;
    for (const socket of sockets) socket.destroy();
    if (current) await new Promise<void>((resolve) => current.close(() => resolve()));
  };

  await listen();
  return {
    get port() {
      return port;
    },
    down: stop,
    up: listen,
    retarget(next) {
      target = { ...next };
    },
    freeze() {
      frozen = true;
      for (const { from, to } of pipes) {
        from.unpipe(to);
        from.pause();
      }
    },
    thaw() {
      frozen = false;
      for (const { from, to } of pipes) from.pipe(to);
    },
    close: stop,
  };
}
