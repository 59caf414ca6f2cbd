import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../support/app.js';
import { type ConnectorsWorld, composioRequests, type Member, member, startWorld } from './support.js';

/**
 * A forwarded MCP request may only name an MCP session Composio gave this installation: another
 * installation's `mcp-session-id` (or a made-up one) is answered `404` here and never reaches
 * Composio. The ids are kept in Postgres, so another broker process (or this one restarted)
 * knows them too.
 */

let w: ConnectorsWorld;
let other: TestApp;
let a: Member;
let b: Member;
const origins: string[] = [];
beforeAll(async () => {
  w = await startWorld();
  // A second broker process on the same database and Composio.
  other = await buildTestApp({ CONNECTOR_REQUESTS_PER_MINUTE: '10000' }, { database: w.t.database, composio: w.h.gateway });
  a = await member(w.t.app);
  b = await member(w.t.app);
  origins.push(await w.t.app.listen({ port: 0, host: '127.0.0.1' }), await other.app.listen({ port: 0, host: '127.0.0.1' }));
});
afterAll(async () => {
  await other.close();
  await w.close();
});

const rpc = (id: number, method: string) => JSON.stringify({ jsonrpc: '2.0', id, method, params: {} });

function mcp(origin: string, m: Member, method: 'POST' | 'DELETE', headers: Record<string, string> = {}, body?: string) {
  return fetch(`${origin}/v1/mcp`, {
    method,
    headers: {
      ...m.auth,
      accept: 'application/json, text/event-stream',
      ...(body ? { 'content-type': 'application/json' } : {}),
      ...headers,
    },
    ...(body ? { body } : {}),
  });
}

async function initialize(origin: string, m: Member): Promise<string> {
  const init = await mcp(origin, m, 'POST', {}, rpc(0, 'initialize'));
  expect(init.status).toBe(200);
  await init.body?.cancel();
  return init.headers.get('mcp-session-id')!;
}

const mcpRequests = (since: number) => composioRequests(w.h, since).filter((r) => r.includes('/tool_router/'));

describe('mcp-session-id', () => {
  it("refuses another installation's MCP session on DELETE and POST without calling Composio", async () => {
    const aSession = await initialize(origins[0]!, a);
    await initialize(origins[0]!, b);
    const before = w.h.sim.controls.requests().length;
    const ended = await mcp(origins[0]!, b, 'DELETE', { 'mcp-session-id': aSession });
    expect(ended.status).toBe(404);
    expect(await ended.json()).toEqual({ error: expect.any(String), code: 'mcp_session_not_found' });
    const used = await mcp(origins[0]!, b, 'POST', { 'mcp-session-id': aSession }, rpc(1, 'tools/list'));
    expect(used.status).toBe(404);
    const madeUp = await mcp(origins[0]!, b, 'POST', { 'mcp-session-id': 'made-up' }, rpc(2, 'tools/list'));
    expect(madeUp.status).toBe(404);
    expect(mcpRequests(before)).toEqual([]);
    // The owner's MCP session is untouched.
    const list = await mcp(origins[0]!, a, 'POST', { 'mcp-session-id': aSession }, rpc(3, 'tools/list'));
    expect(list.status).toBe(200);
    await list.body?.cancel();
  });

  it('knows the ids on every process sharing the database', async () => {
    const session = await initialize(origins[0]!, a);
    const list = await mcp(origins[1]!, a, 'POST', { 'mcp-session-id': session }, rpc(4, 'tools/list'));
    expect(list.status).toBe(200);
    await list.body?.cancel();
    // Still not another installation's, whichever process is asked.
    expect((await mcp(origins[1]!, b, 'DELETE', { 'mcp-session-id': session })).status).toBe(404);
  });

  it('forgets an MCP session once it is ended, so it goes nowhere afterwards', async () => {
    const session = await initialize(origins[0]!, a);
    const ended = await mcp(origins[0]!, a, 'DELETE', { 'mcp-session-id': session });
    expect(ended.status).toBeLessThan(300);
    const before = w.h.sim.controls.requests().length;
    expect((await mcp(origins[1]!, a, 'DELETE', { 'mcp-session-id': session })).status).toBe(404);
    expect(mcpRequests(before)).toEqual([]);
  });
});
