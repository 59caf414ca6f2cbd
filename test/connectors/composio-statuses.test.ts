import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type ConnectorsWorld, type Member, member, startWorld } from './support.js';

/**
 * Composio's statuses never reach the app as the broker's own: whatever Composio answers, on
 * `/v1/mcp` and on the REST routes, the app gets `502`/`503` (or `404`/`422` whose sentence says
 * what was not found or cannot be done) with exactly `{error: string, code}` — never `401` or
 * `403`, which mean "your installation token is bad", and never Composio's own error object.
 */

let w: ConnectorsWorld;
let a: Member;
let origin: string;
beforeAll(async () => {
  w = await startWorld();
  a = await member(w.t.app);
  origin = await w.t.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(() => w.close());
afterEach(() => w.h.sim.controls.clearFaults());

const STATUSES = [400, 401, 403, 404, 405, 406, 407, 408, 409, 410, 413, 415, 422, 429, 500, 501, 502, 503, 504];

const rpc = (id: number, method: string) => JSON.stringify({ jsonrpc: '2.0', id, method, params: {} });

function mcp(headers: Record<string, string>, body: string) {
  return fetch(`${origin}/v1/mcp`, {
    method: 'POST',
    headers: { ...a.auth, 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body,
  });
}

/** The answer is the broker's own failure shape, with a status the contract allows. */
async function expectOurs(response: Response, allowed: number[], context: string): Promise<{ error: string; code: string }> {
  const text = await response.text();
  expect(allowed, `${context}: ${response.status} ${text}`).toContain(response.status);
  const body = JSON.parse(text) as Record<string, unknown>;
  expect(Object.keys(body).sort(), context).toEqual(['code', 'error']);
  expect(typeof body.error, context).toBe('string');
  expect(body.code, context).toMatch(/^[a-z_]+$/);
  // Composio's error object carries its own fields (`message`, `status`, `request_id`…).
  expect(text, context).not.toMatch(/request_id|suggested_fix|"status":/);
  return body as { error: string; code: string };
}

describe('/v1/mcp', () => {
  let session: { 'mcp-session-id': string };
  beforeAll(async () => {
    const init = await mcp({}, rpc(0, 'initialize'));
    await init.body?.cancel();
    session = { 'mcp-session-id': init.headers.get('mcp-session-id')! };
  });

  for (const status of STATUSES) {
    it(`maps Composio's ${status} to 502/503 {error, code}`, async () => {
      w.h.sim.controls.injectFault({ status, path: '/tool_router/', durationMs: 30_000, retryAfter: 0 });
      const resumed = await mcp(session, rpc(1, 'tools/list'));
      await expectOurs(resumed, [502, 503], `resumed, ${status}`);
      // Fresh (no MCP session yet): a 404 here first makes the broker look for a new Session.
      const fresh = await mcp({}, rpc(2, 'initialize'));
      await expectOurs(fresh, [502, 503], `fresh, ${status}`);
    });
  }

  it("still passes the MCP server's own JSON-RPC error answers on as they are", async () => {
    // The simulated MCP server answers an unknown MCP session 404 with a JSON-RPC error: the
    // MCP client then starts a new MCP session, as the protocol says. (An id the broker never saw
    // is answered by the broker itself: this one is recorded as given, as if it had expired upstream.)
    await w.t.database.sql`insert into mcp_sessions (installation_id, mcp_session_id) values (${a.installationId}, 'expired-upstream')`;
    const response = await mcp({ 'mcp-session-id': 'expired-upstream' }, rpc(3, 'tools/list'));
    expect(response.status).toBe(404);
    expect(await response.json()).toMatchObject({ jsonrpc: '2.0', error: { message: expect.any(String) } });
  });
});

describe('REST routes', () => {
  const routes = [
    ['GET', '/v1/connectors/connected', undefined],
    ['POST', '/v1/connectors/gmail/authorize', '{}'],
  ] as const;

  for (const status of STATUSES) {
    it(`maps Composio's ${status} to 502/503 (or a 404/422 that says what) with {error, code}`, async () => {
      w.h.sim.controls.injectFault({ status, path: '/api/', durationMs: 30_000, retryAfter: 0 });
      for (const [method, path, body] of routes) {
        const response = await fetch(`${origin}${path}`, {
          method,
          headers: { ...a.auth, ...(body ? { 'content-type': 'application/json' } : {}) },
          ...(body ? { body } : {}),
        });
        await expectOurs(response, [404, 422, 502, 503], `${method} ${path}, ${status}`);
      }
    });
  }

  it('says which app Composio does not know, not that the Session is unknown', async () => {
    const response = await fetch(`${origin}/v1/connectors/nosuchapp/authorize`, {
      method: 'POST',
      headers: { ...a.auth, 'content-type': 'application/json' },
      body: '{}',
    });
    const body = await expectOurs(response, [404], 'unknown toolkit');
    expect(body).toEqual({ error: 'Composio does not know the app nosuchapp.', code: 'composio_not_found' });
  });
});
