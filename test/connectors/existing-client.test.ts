import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createComposioGateway } from '../../src/composio/index.js';
import { type Simulator, startSimulator } from '../../src/sim/index.js';
import { linkToken, silentLogger } from '../composio/harness.js';
import { adminClaims, operatorKey, signClaims, type TestOperatorKey, trusting } from '../operators/support.js';
import { buildTestApp, type TestApp } from '../support/app.js';

/**
 * The existing OpenMausBot client's requests (reference/existing-client.md), replayed over real
 * HTTP with the client's own checks. The simulator answers as Composio does, with consent links
 * on https://connect.composio.dev, so the client's link check is the real one.
 */

const TOKEN = /^[0-9a-f]{64}$/;

/** The client's link check: https on composio.dev or a subdomain of it, nothing else. */
function clientAcceptsUrl(url: string): boolean {
  const parsed = new URL(url);
  return parsed.protocol === 'https:' && (parsed.hostname === 'composio.dev' || parsed.hostname.endsWith('.composio.dev'));
}

/** What the client shows a person for a failed request. */
function shownError(status: number, body: any): string {
  return body?.message ?? body?.error?.message ?? body?.error ?? `HTTP ${status}`;
}

let sim: Simulator;
let t: TestApp;
let broker: string;
let operator: TestOperatorKey;

beforeAll(async () => {
  operator = await operatorKey('op-existing-client');
  sim = await startSimulator({ apiKey: 'sim_client_key', logger: false, consentLinkOrigin: 'https://connect.composio.dev' });
  const composio = createComposioGateway({
    apiKey: sim.apiKey,
    baseUrl: sim.origin,
    callsPerMinute: 60_000,
    timeoutMs: 5000,
    logger: silentLogger,
  });
  t = await buildTestApp({ CONNECTOR_REQUESTS_PER_MINUTE: '1000', ...trusting(operator) }, { composio });
  broker = (await t.app.listen({ port: 0, host: '127.0.0.1' })).replace(/\/$/, '');
});
afterAll(async () => {
  await t.close();
  await sim.close();
});

class ExistingClient {
  token = '';
  constructor(private readonly url: string) {}

  private async call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}, timeoutMs = 30_000) {
    const response = await fetch(`${this.url}${path}`, {
      method,
      redirect: 'error',
      signal: AbortSignal.timeout(timeoutMs),
      headers: {
        ...(this.token ? { authorization: `Bearer ${this.token}` } : {}),
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...headers,
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    let json: any;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    return { status: response.status, headers: response.headers, json, text };
  }

  async register() {
    const r = await this.call('POST', '/v1/installations', {}, {}, 15_000);
    if (r.status < 200 || r.status >= 300) throw new Error(shownError(r.status, r.json));
    if (typeof r.json?.installationId !== 'string' || !TOKEN.test(r.json?.token)) throw new Error('bad registration answer');
    this.token = r.json.token;
    return r.json as { installationId: string; token: string };
  }

  async checkIn() {
    const r = await this.call('GET', '/v1/me', undefined, {}, 8000);
    return r.status;
  }

  /** What the app does at every start: check in, and register anew only when told `401`. */
  async start(): Promise<'kept' | 'registered'> {
    if ((await this.checkIn()) !== 401) return 'kept';
    await this.register();
    return 'registered';
  }

  connected() {
    return this.call('GET', '/v1/connectors/connected');
  }
  services(slugs: string[]) {
    return this.call('GET', `/v1/connectors?services=${slugs.join(',')}`);
  }
  async authorize(slug: string, alias?: string) {
    const r = await this.call('POST', `/v1/connectors/${slug}/authorize`, alias === undefined ? undefined : { alias });
    if (r.status >= 200 && r.status < 300 && !clientAcceptsUrl(r.json.url)) throw new Error(`client refuses ${r.json.url}`);
    return r;
  }
  disconnect(slug: string, accountId?: string) {
    return this.call('DELETE', accountId ? `/v1/connectors/${slug}/accounts/${accountId}` : `/v1/connectors/${slug}`);
  }
  mcp(message: unknown, sessionId?: string) {
    return this.call(
      'POST',
      '/v1/mcp',
      message,
      {
        accept: 'application/json, text/event-stream',
        ...(sessionId ? { 'mcp-session-id': sessionId } : {}),
      },
      600_000,
    );
  }
  catalog() {
    return this.call('GET', '/v1/catalog');
  }
}

describe('the existing client, unchanged', () => {
  it('registers, checks in, connects two labelled Gmail accounts, lists tools and disconnects', async () => {
    const client = new ExistingClient(broker);
    const { installationId } = await client.register();
    expect(installationId).toMatch(/^[0-9a-f-]{36}$/);
    expect(await client.checkIn()).toBe(200);

    const empty = await client.connected();
    expect(empty.status).toBe(200);
    expect(empty.json).toEqual({ configured: true, services: expect.any(Object) });

    const work = await client.authorize('gmail', 'work');
    expect(work.status).toBe(200);
    expect(clientAcceptsUrl(work.json.url)).toBe(true);
    sim.controls.authorizeLink(linkToken(work.json.url));

    // A second account beside a working one needs a label; the error is a plain string.
    const unlabelled = await client.authorize('gmail');
    expect(unlabelled.status).toBe(400);
    expect(typeof shownError(unlabelled.status, unlabelled.json)).toBe('string');
    expect(shownError(unlabelled.status, unlabelled.json)).toMatch(/label/);

    const personal = await client.authorize('gmail', 'personal');
    expect(personal.status).toBe(200);
    sim.controls.authorizeLink(linkToken(personal.json.url));

    const inventory = await client.connected();
    const gmail = inventory.json.services.gmail;
    expect(gmail).toMatchObject({ connected: true, pending: false, status: 'ACTIVE' });
    expect(gmail.accounts.map((a: any) => a.alias).sort()).toEqual(['personal', 'work']);
    for (const account of gmail.accounts) expect(account).toEqual({ id: expect.any(String), alias: expect.any(String), status: 'ACTIVE' });

    const asked = await client.services(['gmail', 'slack']);
    expect(Object.keys(asked.json.services).sort()).toEqual(['gmail', 'slack']);
    expect(asked.json.services.slack.connected).toBe(false);

    const init = await client.mcp({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'omb', version: '1' } },
    });
    expect(init.status).toBe(200);
    const mcpSession = init.headers.get('mcp-session-id')!;
    expect(mcpSession).toBeTruthy();
    const tools = await client.mcp({ jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} }, mcpSession);
    expect(tools.status).toBe(200);
    expect(tools.text).toContain('COMPOSIO_MANAGE_CONNECTIONS');

    const catalog = await client.catalog();
    expect(catalog.status).toBe(200);
    expect(Array.isArray(catalog.json.items)).toBe(true);

    const removed = await client.disconnect('gmail', personal.json.connectedAccountId);
    expect(removed.json).toEqual({ removed: 1 });
    const again = await client.disconnect('gmail', personal.json.connectedAccountId);
    expect(again.json).toEqual({ removed: 0 });
    const left = await client.connected();
    expect(left.json.services.gmail.accounts.map((a: any) => a.alias)).toEqual(['work']);

    const selected = await client.disconnect('gmail');
    expect(selected.json).toEqual({ removed: 1 });
  });

  it('keeps its token on anything but 401, and registers again only after a 401', async () => {
    const client = new ExistingClient(broker);
    await client.register();
    expect(await client.checkIn()).toBe(200);
    const stale = new ExistingClient(broker);
    stale.token = 'f'.repeat(64);
    expect(await stale.checkIn()).toBe(401);
  });

  it('keeps its token and its accounts through an operator’s disable, and is whole again once re-enabled', async () => {
    const client = new ExistingClient(broker);
    const { installationId } = await client.register();
    const token = client.token;
    const work = await client.authorize('gmail', 'work');
    sim.controls.authorizeLink(linkToken(work.json.url));
    const admin = async (action: 'disable' | 'enable') => {
      const bearer = await signClaims(operator, adminClaims(t.clock.now()));
      const r = await fetch(`${broker}/v1/admin/installations/${installationId}/${action}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${bearer}` },
      });
      expect(r.status).toBe(200);
    };

    await admin('disable');
    const refused = await client.connected();
    expect(refused.status).toBe(403);
    expect(refused.json).toEqual({ error: expect.any(String), code: 'installation_disabled' });
    expect(await client.checkIn()).toBe(403);
    // The app restarts while disabled: it keeps its token instead of registering a new installation.
    expect(await client.start()).toBe('kept');
    expect(client.token).toBe(token);

    await admin('enable');
    expect(await client.start()).toBe('kept');
    expect(client.token).toBe(token);
    const inventory = await client.connected();
    expect(inventory.status).toBe(200);
    expect(inventory.json.services.gmail.accounts).toEqual([{ id: work.json.connectedAccountId, alias: 'work', status: 'ACTIVE' }]);
  });

  it('never sees another installation’s accounts', async () => {
    const one = new ExistingClient(broker);
    const two = new ExistingClient(broker);
    await one.register();
    await two.register();
    const link = await one.authorize('slack', 'team');
    sim.controls.authorizeLink(linkToken(link.json.url));
    expect((await two.connected()).json.services.slack).toBeUndefined();
    expect((await two.disconnect('slack', link.json.connectedAccountId)).json).toEqual({ removed: 0 });
    expect((await one.connected()).json.services.slack.connected).toBe(true);
  });
});
