import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../composio/harness.js';
import { buildTestApp, type TestApp } from '../support/app.js';
import { type Member, member } from './support.js';

/**
 * Tool calls that take minutes (workbench, multi-execute of many tools): the MCP request has its
 * own deadline, `MCP_TIMEOUT_MS`, for the MCP server's status and headers, and a streamed answer
 * that keeps sending is never cut. `COMPOSIO_TIMEOUT_MS` (the other routes' deadline) is set far
 * below the slow answers here, and `MCP_TIMEOUT_MS` small, so nothing sleeps minutes.
 */

const COMPOSIO_TIMEOUT_MS = 500;
const MCP_TIMEOUT_MS = 1_500;
const BOTH = 'application/json, text/event-stream';
const rpc = (id: number, method: string, params: unknown = {}) => JSON.stringify({ jsonrpc: '2.0', id, method, params });

let h: Harness;
let t: TestApp;
let a: Member;
let origin: string;
let session: Record<string, string>;

beforeAll(async () => {
  h = await startHarness({ timeoutMs: COMPOSIO_TIMEOUT_MS });
  t = await buildTestApp(
    {
      CONNECTOR_REQUESTS_PER_MINUTE: '10000',
      COMPOSIO_TIMEOUT_MS: String(COMPOSIO_TIMEOUT_MS),
      MCP_TIMEOUT_MS: String(MCP_TIMEOUT_MS),
    },
    { composio: h.gateway },
  );
  a = await member(t.app);
  origin = (await t.app.listen({ port: 0, host: '127.0.0.1' })).replace(/\/$/, '');

  const init = await mcp(
    rpc(0, 'initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } }),
  );
  expect(init.status).toBe(200);
  await init.body?.cancel();
  session = { 'mcp-session-id': init.headers.get('mcp-session-id')! };
});
afterAll(async () => {
  await t.close();
  await h.close();
});

function mcp(body: string, headers: Record<string, string> = {}) {
  return fetch(`${origin}/v1/mcp`, {
    method: 'POST',
    headers: { ...a.auth, 'content-type': 'application/json', accept: BOTH, ...headers },
    body,
  });
}

const slow = (answerAs: 'json' | 'sse', delayMs: number) => h.sim.controls.injectFault({ path: '/tool_router/', answerAs, delayMs });

describe('slow MCP answers', () => {
  it('passes on a JSON answer slower than COMPOSIO_TIMEOUT_MS, within MCP_TIMEOUT_MS', async () => {
    slow('json', 1_000);
    const started = performance.now();
    const response = await mcp(rpc(1, 'tools/list'), session);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await response.text()).toContain('COMPOSIO_MULTI_EXECUTE_TOOL');
    expect(performance.now() - started).toBeGreaterThanOrEqual(950);
  });

  it('gives up on an MCP server that sends no status within MCP_TIMEOUT_MS (502)', async () => {
    slow('json', 4_000);
    const started = performance.now();
    const response = await mcp(rpc(2, 'tools/list'), session);
    expect(response.status).toBe(502);
    expect(await response.json()).toEqual({
      error: 'Composio did not answer within 2 s; try again shortly.',
      code: 'upstream_unavailable',
    });
    const waited = performance.now() - started;
    expect(waited).toBeGreaterThanOrEqual(MCP_TIMEOUT_MS - 50);
    expect(waited).toBeLessThan(3_500);
  });

  it('never cuts a stream that keeps sending, however long past MCP_TIMEOUT_MS the answer comes', async () => {
    slow('sse', 3_500);
    const started = performance.now();
    const response = await mcp(rpc(3, 'tools/list'), session);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const text = await response.text();
    expect(performance.now() - started).toBeGreaterThanOrEqual(3_400);
    expect(text).toContain('"id":3');
    expect(text).toContain('COMPOSIO_GET_TOOL_SCHEMAS');
  });

  it('cuts off a stream that goes silent for MCP_TIMEOUT_MS', async () => {
    h.sim.controls.setMcpStreaming({ chunks: 3, intervalMs: 3_000, times: 1 });
    const response = await mcp(rpc(4, 'tools/list'), session);
    expect(response.status).toBe(200);
    const started = performance.now();
    await expect(response.text()).rejects.toThrow();
    expect(performance.now() - started).toBeLessThan(2_900);
    // Cut off by the broker (Composio went quiet), not the client closing.
    await expect
      .poll(() => t.logs.lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.msg === 'request' && l.cutOff === true))
      .toEqual([expect.objectContaining({ method: 'POST', url: '/v1/mcp', status: 200 })]);
  });

  it('ends the upstream call when the client hangs up while the tool still runs', async () => {
    slow('json', 5_000);
    const before = h.sim.controls.requests().length;
    // A raw connection, so the test decides exactly when it goes.
    const body = rpc(5, 'tools/list');
    const headers = {
      ...a.auth,
      'content-type': 'application/json',
      accept: BOTH,
      ...session,
      'content-length': String(Buffer.byteLength(body)),
    };
    const socket = connect(Number(new URL(origin).port), '127.0.0.1');
    socket.on('error', () => {});
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    socket.write(
      `POST /v1/mcp HTTP/1.1\r\nhost: 127.0.0.1\r\n${Object.entries(headers)
        .map(([k, v]) => `${k}: ${v}\r\n`)
        .join('')}\r\n${body}`,
    );
    const upstream = () =>
      h.sim.controls
        .requests()
        .slice(before)
        .find((r) => r.path.includes('/tool_router/'));
    await expect.poll(() => upstream()).toBeDefined();
    const gone = performance.now();
    socket.destroy();
    // Well before MCP_TIMEOUT_MS would have ended it.
    await expect.poll(() => upstream()?.abandoned, { timeout: MCP_TIMEOUT_MS / 2 }).toBe(true);
    expect(performance.now() - gone).toBeLessThan(MCP_TIMEOUT_MS / 2);
    expect(upstream()?.status).toBeNull();
  });
});
