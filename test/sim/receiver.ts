import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { verifyWebhookSignature } from '../../src/composio/index.js';

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

/** Whether a delivery the receiver got is signed with `secret`, as the broker checks it. */
export function signedWith(delivery: Received | undefined, secret: string) {
  return verifyWebhookSignature({
    id: delivery?.headers['webhook-id'] as string,
    timestamp: delivery?.headers['webhook-timestamp'] as string,
    signatureHeader: delivery?.headers['webhook-signature'] as string,
    rawBody: delivery?.body ?? '',
    secrets: [secret],
    nowSeconds: Math.floor(Date.now() / 1000),
  });
}
