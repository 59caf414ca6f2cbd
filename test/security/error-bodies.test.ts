import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../support/app.js';

/**
 * What Node's HTTP parser and Fastify's router refuse before any route runs is answered like
 * everything else: `{error, code}` with the right status, never quoting the request's path.
 */

let t: TestApp;
let port: number;
beforeAll(async () => {
  t = await buildTestApp();
  port = Number(new URL(await t.app.listen({ port: 0, host: '127.0.0.1' })).port);
});
afterAll(() => t.close());

/** Sends raw bytes and reads whatever comes back until the broker closes the connection. */
function raw(bytes: string): Promise<{ status: number; body: string; text: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(bytes));
    let text = '';
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1');
      // One answer is enough: keep-alive answers would otherwise hold the socket open.
      const [head, body = ''] = text.split('\r\n\r\n');
      const length = /content-length: (\d+)/i.exec(head ?? '');
      if (length && Buffer.byteLength(body) >= Number(length[1])) socket.destroy();
    });
    socket.on('error', reject);
    socket.on('close', () => {
      const [head = '', body = ''] = text.split('\r\n\r\n');
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1]), body, text });
    });
  });
}

const MARKER = 'zzmarkerzz';

describe('refusals before any route runs', () => {
  it('a request Node cannot parse gets 400 {error, code}', async () => {
    const answer = await raw(`GET /v1/${MARKER} HTTP/1.1\r\nHost: x\r\nBad Header Without Colon\r\n\r\n`);
    expect(answer.status).toBe(400);
    expect(JSON.parse(answer.body)).toEqual({ error: expect.any(String), code: 'bad_request' });
    expect(answer.text).not.toContain(MARKER);
  });

  it('headers over the limit get 431 {error, code}', async () => {
    const answer = await raw(`GET /v1/${MARKER} HTTP/1.1\r\nHost: x\r\nx-big: ${'a'.repeat(20_000)}\r\n\r\n`);
    expect(answer.status).toBe(431);
    expect(JSON.parse(answer.body)).toEqual({ error: expect.any(String), code: 'headers_too_large' });
    expect(answer.text).not.toContain(MARKER);
  });

  it('a path parameter over the router limit gets 414 {error, code} without the path', async () => {
    const long = `${MARKER}${'a'.repeat(300)}`;
    for (const path of [`/v1/triggers/${long}`, `/v1/connectors/${long}/authorize`]) {
      const response = await fetch(`http://127.0.0.1:${port}${path}`, { method: path.endsWith('authorize') ? 'POST' : 'GET' });
      expect(response.status).toBe(414);
      const text = await response.text();
      expect(JSON.parse(text)).toEqual({ error: expect.any(String), code: 'uri_too_long' });
      expect(text).not.toContain(MARKER);
    }
  });

  it('a URL the router cannot decode gets 400 {error, code} without the path', async () => {
    const answer = await raw(`GET /v1/triggers/${MARKER}%E0%A4%A HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    expect(answer.status).toBe(400);
    expect(JSON.parse(answer.body)).toEqual({ error: expect.any(String), code: 'invalid_url' });
    expect(answer.text).not.toContain(MARKER);
  });
});

describe('while the broker closes', () => {
  it('turns a request that still arrives away with 503 {error, code}', async () => {
    const closing = await buildTestApp();
    const closingPort = Number(new URL(await closing.app.listen({ port: 0, host: '127.0.0.1' })).port);
    const socket = connect(closingPort, '127.0.0.1');
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    let text = '';
    socket.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
    // The connection is busy (a body still arriving) when the close begins…
    socket.write('POST /v1/installations HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{');
    await new Promise((resolve) => setTimeout(resolve, 100));
    const closed = closing.close();
    await new Promise((resolve) => setTimeout(resolve, 100));
    // …then the body ends and another request follows on the same connection.
    socket.write('}GET /health HTTP/1.1\r\nHost: x\r\n\r\n');
    await closed;
    await new Promise((resolve) => (socket.destroyed ? resolve(undefined) : socket.once('close', resolve)));
    const answers = text.split(/(?=HTTP\/1\.1 )/);
    const last = answers.at(-1)!;
    expect(last).toMatch(/^HTTP\/1\.1 503 /);
    expect(JSON.parse(last.split('\r\n\r\n')[1]!)).toEqual({ error: expect.any(String), code: 'shutting_down' });
  });
});
