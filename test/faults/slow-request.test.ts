import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { buildTestApp, type TestApp } from '../support/app.js';

/**
 * A request (headers and body) must arrive within REQUEST_TIMEOUT_MS: a client trickling bytes
 * gets `408 {error, code}` then, not a minute later (Node's default check every 30 s let a
 * trickled body live 60-75 s where the code said 30 s).
 */

const TIMEOUT_MS = 2_000;
let t: TestApp;
let port: number;
beforeAll(async () => {
  t = await buildTestApp({ REQUEST_TIMEOUT_MS: String(TIMEOUT_MS) });
  port = Number(new URL(await t.app.listen({ port: 0, host: '127.0.0.1' })).port);
});
afterAll(() => t.close());

/** Sends `start`, then one more byte of `drip` every 200 ms; resolves when the broker closes the connection. */
function trickle(start: string, drip: string): Promise<{ ms: number; text: string }> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    let text = '';
    const socket = connect(port, '127.0.0.1', () => socket.write(start));
    const timer = setInterval(() => socket.writable && socket.write(drip), 200);
    socket.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
    socket.on('error', (error) => (text === '' ? reject(error) : undefined));
    socket.on('close', () => {
      clearInterval(timer);
      resolve({ ms: performance.now() - started, text });
    });
  });
}

function expectTimedOut(answer: { ms: number; text: string }) {
  expect(answer.text).toMatch(/^HTTP\/1\.1 408 /);
  expect(JSON.parse(answer.text.split('\r\n\r\n')[1]!)).toEqual({ error: expect.any(String), code: 'request_timeout' });
  // Within a second (the check interval) and a little of the configured bound.
  expect(answer.ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
  expect(answer.ms).toBeLessThan(TIMEOUT_MS + 1_500);
}

describe('a request that arrives too slowly', () => {
  it('is cut at REQUEST_TIMEOUT_MS while its body trickles', async () => {
    const head = 'POST /v1/installations HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{';
    expectTimedOut(await trickle(head, ' '));
  });

  it('is cut at REQUEST_TIMEOUT_MS while its headers trickle', async () => {
    expectTimedOut(await trickle('GET /health HTTP/1.1\r\nHost: x\r\n', 'x'));
  });

  it('defaults to the 30 s the README states', () => {
    expect(loadConfig({}).requestTimeoutMs).toBe(30_000);
  });
});
