import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/** A stand-in for the broker's webhook endpoint: records raw deliveries, answers `status`. */
export async function startReceiver(status = 200) {
  const received: Received[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks) });
      res.writeHead(receiver.status, { 'content-type': 'application/json' }).end('{"ok":true}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const receiver = {
    url: `http://127.0.0.1:${port}/v1/webhooks/composio`,
    status,
    received,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
  return receiver;
}
