import { deleteAccount } from './accounts.js';
import { findTool, findToolkit, TOOLKITS } from './catalog.js';
import { SimError } from './errors.js';
import { createLink, linkWire, sessionToolkitSlugs } from './sessions.js';
import type { AccountRecord, SessionRecord, SimStore } from './store.js';

/**
 * The Tool Router's MCP server, protocol side: JSON-RPC 2.0 messages in, responses out. The
 * HTTP side (Streamable HTTP, JSON or SSE) is in `routes/mcp.ts`. The three meta-tools are
 * the router's; their input schemas and result shapes are plausible reconstructions, not
 * Composio's published contract.
 */

export const MCP_PROTOCOL_VERSION = '2025-06-18';

export interface JsonRpcRequest {
  jsonrpc: '2.0';
  id?: string | number | null;
  method: string;
  params?: Record<string, unknown>;
}

export type JsonRpcResponse =
  | { jsonrpc: '2.0'; id: string | number | null; result: unknown }
  | { jsonrpc: '2.0'; id: string | number | null; error: { code: number; message: string; data?: unknown } };

export const RpcError = { parse: -32700, invalidRequest: -32600, methodNotFound: -32601, invalidParams: -32602 } as const;

export const META_TOOLS = [
  {
    name: 'COMPOSIO_SEARCH_TOOLS',
    description: 'Find the tools that fit a task, with the connection status of their apps.',
    inputSchema: {
      type: 'object',
      properties: {
        queries: {
          type: 'array',
          items: {
            type: 'object',
            properties: { use_case: { type: 'string' }, known_fields: { type: 'string' } },
            required: ['use_case'],
          },
        },
        session: { type: 'object', properties: { id: { type: 'string' }, generate_id: { type: 'boolean' } } },
      },
      required: ['queries'],
    },
  },
  {
    name: 'COMPOSIO_MULTI_EXECUTE_TOOL',
    description: 'Run one or more tools found with COMPOSIO_SEARCH_TOOLS.',
    inputSchema: {
      type: 'object',
      properties: {
        tools: {
          type: 'array',
          items: {
            type: 'object',
            properties: {
              tool_slug: { type: 'string' },
              arguments: { type: 'object' },
              account: { type: 'string', description: 'Connected account id or alias; required when the app has several accounts.' },
            },
            required: ['tool_slug', 'arguments'],
          },
        },
        thought: { type: 'string' },
        current_step: { type: 'string' },
      },
      required: ['tools'],
    },
  },
  {
    name: 'COMPOSIO_MANAGE_CONNECTIONS',
    description: 'Connect an app (returns a sign-in link), reconnect a signed-out one, or remove an account.',
    inputSchema: {
      type: 'object',
      properties: {
        toolkits: { type: 'array', items: { type: 'string' } },
        action: { type: 'string', enum: ['connect', 'remove'] },
        alias: { type: 'string', description: 'Label for a new account' },
        account: { type: 'string', description: 'Account id or alias to remove' },
        reinitiate_all: { type: 'boolean' },
      },
      required: ['toolkits'],
    },
  },
] as const;

export function handleRpc(store: SimStore, session: SessionRecord, message: JsonRpcRequest): JsonRpcResponse | undefined {
  const id = message.id ?? null;
  // Notifications (no id) are acknowledged by the transport with 202 and no body.
  if (message.id === undefined) return undefined;
  switch (message.method) {
    case 'initialize':
      return {
        jsonrpc: '2.0',
        id,
        result: {
          protocolVersion: typeof message.params?.protocolVersion === 'string' ? message.params.protocolVersion : MCP_PROTOCOL_VERSION,
          capabilities: { tools: { listChanged: false }, logging: {} },
          serverInfo: { name: 'composio-tool-router', version: 'simulator' },
          instructions:
            'Search with COMPOSIO_SEARCH_TOOLS, run with COMPOSIO_MULTI_EXECUTE_TOOL, connect apps with COMPOSIO_MANAGE_CONNECTIONS.',
        },
      };
    case 'ping':
      return { jsonrpc: '2.0', id, result: {} };
    case 'tools/list':
      return { jsonrpc: '2.0', id, result: { tools: META_TOOLS } };
    case 'tools/call':
      return callTool(store, session, id, message.params ?? {});
    default:
      return { jsonrpc: '2.0', id, error: { code: RpcError.methodNotFound, message: `Method not found: ${message.method}` } };
  }
}

function callTool(store: SimStore, session: SessionRecord, id: string | number | null, params: Record<string, unknown>): JsonRpcResponse {
  const name = params.name;
  const args = typeof params.arguments === 'object' && params.arguments !== null ? (params.arguments as Record<string, unknown>) : {};
  let result: { successful: boolean; data: unknown; error: string | null };
  if (name === 'COMPOSIO_SEARCH_TOOLS') result = searchTools(store, session, args);
  else if (name === 'COMPOSIO_MULTI_EXECUTE_TOOL') result = multiExecute(store, session, args);
  else if (name === 'COMPOSIO_MANAGE_CONNECTIONS') result = manageConnections(store, session, args);
  else return { jsonrpc: '2.0', id, error: { code: RpcError.invalidParams, message: `Unknown tool: ${String(name)}` } };
  return {
    jsonrpc: '2.0',
    id,
    result: { content: [{ type: 'text', text: JSON.stringify(result) }], isError: !result.successful },
  };
}

function accountsOf(store: SimStore, session: SessionRecord, toolkit: string): AccountRecord[] {
  return [...store.accounts.values()].filter((a) => a.userId === session.userId && a.toolkit === toolkit).sort((a, b) => b.seq - a.seq);
}

function connectionStatus(store: SimStore, session: SessionRecord, toolkit: string) {
  const def = findToolkit(toolkit);
  const accounts = accountsOf(store, session, toolkit);
  const active = accounts.filter((a) => a.status === 'ACTIVE');
  return {
    toolkit,
    has_active_connection: def?.noAuth === true || active.length > 0,
    status_message: def?.noAuth
      ? 'No authentication required'
      : active.length > 0
        ? `${active.length} active account(s)`
        : 'No active connection; use COMPOSIO_MANAGE_CONNECTIONS',
    accounts: accounts.map((a, index) => ({
      id: a.id,
      alias: a.alias,
      status: a.status,
      is_default: index === 0,
      created_at: a.createdAt,
      account_type: 'PRIVATE',
    })),
    ...(active.length > 1 && session.config.multi_account?.require_explicit_selection ? { account_selection: 'required' } : {}),
  };
}

function searchTools(store: SimStore, session: SessionRecord, args: Record<string, unknown>) {
  const queries = Array.isArray(args.queries) ? args.queries : [];
  const enabled = new Set(sessionToolkitSlugs(session, undefined));
  const results = queries.map((q) => {
    const useCase = typeof (q as { use_case?: unknown })?.use_case === 'string' ? (q as { use_case: string }).use_case : '';
    const words = useCase
      .toLowerCase()
      .split(/\W+/)
      .filter((w) => w.length > 2);
    const tools = TOOLKITS.filter((t) => enabled.has(t.slug)).flatMap((t) =>
      t.tools
        .filter((tool) => words.some((w) => `${tool.slug} ${tool.description} ${t.name}`.toLowerCase().includes(w)))
        .map((tool) => ({ tool, toolkit: t.slug })),
    );
    return {
      use_case: useCase,
      primary_tool_slugs: tools.slice(0, 3).map((t) => t.tool.slug),
      related_tool_slugs: tools.slice(3).map((t) => t.tool.slug),
      toolkits: [...new Set(tools.map((t) => t.toolkit))],
    };
  });
  const toolkits = [...new Set(results.flatMap((r) => r.toolkits))];
  const schemas = Object.fromEntries(
    results
      .flatMap((r) => [...r.primary_tool_slugs, ...r.related_tool_slugs])
      .map((slug) => {
        const found = findTool(slug);
        return [
          slug,
          { tool_slug: slug, toolkit: found?.toolkit.slug, description: found?.tool.description, input_schema: found?.tool.inputSchema },
        ];
      }),
  );
  return {
    successful: true,
    data: {
      results,
      tool_schemas: schemas,
      toolkit_connection_statuses: toolkits.map((t) => connectionStatus(store, session, t)),
      next_steps_guidance: ['Connect any app without an active connection with COMPOSIO_MANAGE_CONNECTIONS, then run the tools.'],
    },
    error: null,
  };
}

/** Picks the account a tool runs with, or says why there is none (USER_NOT_LOGGED_IN when signed out). */
function pickAccount(store: SimStore, session: SessionRecord, toolkit: string, wanted: string | undefined): AccountRecord | string {
  const accounts = accountsOf(store, session, toolkit);
  const signedOut = (a: AccountRecord) =>
    `USER_NOT_LOGGED_IN: the ${toolkit} account ${a.alias ? `'${a.alias}' ` : ''}(${a.id}) is ${a.status}; the user must reconnect it with COMPOSIO_MANAGE_CONNECTIONS.`;
  if (wanted) {
    const account = accounts.find((a) => a.id === wanted || a.alias?.toLowerCase() === wanted.toLowerCase());
    if (!account) return `No connected account '${wanted}' for ${toolkit}.`;
    if (account.status === 'ACTIVE') return account;
    if (account.status === 'INITIATED' || account.status === 'INITIALIZING')
      return `The ${toolkit} account ${account.id} has not finished signing in.`;
    return signedOut(account);
  }
  const active = accounts.filter((a) => a.status === 'ACTIVE');
  if (active.length === 1 || (active.length > 1 && !session.config.multi_account?.require_explicit_selection)) {
    return active[0] as AccountRecord;
  }
  if (active.length > 1) {
    const list = active.map((a) => `${a.id}${a.alias ? ` (${a.alias})` : ''}`).join(', ');
    return `Multiple connected accounts for ${toolkit}: ${list}. Pass 'account' with the id or alias to use.`;
  }
  const lapsed = accounts.find((a) => ['EXPIRED', 'FAILED', 'REVOKED', 'INACTIVE'].includes(a.status));
  if (lapsed) return signedOut(lapsed);
  return `No connected account for ${toolkit}; connect it with COMPOSIO_MANAGE_CONNECTIONS.`;
}

function multiExecute(store: SimStore, session: SessionRecord, args: Record<string, unknown>) {
  const calls = Array.isArray(args.tools) ? (args.tools as Record<string, unknown>[]) : [];
  if (calls.length === 0) return { successful: false, data: null, error: 'tools must be a non-empty array' };
  const enabled = new Set(sessionToolkitSlugs(session, undefined));
  const results = calls.map((call, index) => {
    const slug = typeof call?.tool_slug === 'string' ? call.tool_slug : '';
    const found = findTool(slug);
    const fail = (error: string) => ({ tool_slug: slug, index, response: { successful: false, data: null, error } });
    if (!found) return fail(`Tool ${slug || '(missing)'} not found`);
    if (!enabled.has(found.toolkit.slug)) return fail(`Toolkit ${found.toolkit.slug} is not enabled in this session`);
    let account: AccountRecord | undefined;
    if (!found.toolkit.noAuth) {
      const picked = pickAccount(store, session, found.toolkit.slug, typeof call.account === 'string' ? call.account : undefined);
      if (typeof picked === 'string') return fail(picked);
      account = picked;
    }
    return {
      tool_slug: slug,
      index,
      response: {
        successful: true,
        data: { simulated: true, tool: slug, arguments: call.arguments ?? {}, ...(account ? { connected_account_id: account.id } : {}) },
        error: null,
      },
    };
  });
  const failed = results.filter((r) => !r.response.successful);
  return {
    successful: failed.length === 0,
    data: { results, total_count: results.length, success_count: results.length - failed.length, error_count: failed.length },
    error: failed.length === 0 ? null : failed.map((f) => f.response.error).join(' '),
  };
}

function manageConnections(store: SimStore, session: SessionRecord, args: Record<string, unknown>) {
  const toolkits = Array.isArray(args.toolkits) ? args.toolkits.filter((t): t is string => typeof t === 'string') : [];
  if (toolkits.length === 0) return { successful: false, data: null, error: 'toolkits must list at least one toolkit' };
  const action = args.action === 'remove' ? 'remove' : 'connect';
  if (action === 'remove' && !session.config.manage_connections.enable_connection_removal) {
    return { successful: false, data: null, error: 'Removing connections is disabled for this session' };
  }
  const results: Record<string, unknown> = {};
  for (const slug of toolkits.map((t) => t.toLowerCase())) {
    const toolkit = findToolkit(slug);
    if (!toolkit) {
      results[slug] = { status: 'error', error: `Toolkit ${slug} not found` };
      continue;
    }
    const accounts = accountsOf(store, session, slug);
    if (action === 'remove') {
      const wanted = typeof args.account === 'string' ? args.account.toLowerCase() : undefined;
      const target = accounts.find((a) => !wanted || a.id.toLowerCase() === wanted || a.alias?.toLowerCase() === wanted);
      if (target) deleteAccount(store, target.id);
      results[slug] = target ? { status: 'removed', connected_account_id: target.id } : { status: 'error', error: 'No such account' };
      continue;
    }
    if (toolkit.noAuth) {
      results[slug] = { status: 'no_auth_required' };
      continue;
    }
    if (accounts.some((a) => a.status === 'ACTIVE') && args.reinitiate_all !== true && typeof args.alias !== 'string') {
      results[slug] = { status: 'active', ...connectionStatus(store, session, slug) };
      continue;
    }
    try {
      const link = createLink(store, session, { toolkit: slug, ...(typeof args.alias === 'string' ? { alias: args.alias } : {}) });
      const wire = linkWire(store, link);
      results[slug] = {
        status: 'initiated',
        redirect_url: wire.redirect_url,
        connected_account_id: wire.connected_account_id,
        expires_at: wire.expires_at,
      };
    } catch (error) {
      results[slug] = { status: 'error', error: error instanceof SimError ? error.message : String(error) };
    }
  }
  const errors = Object.values(results).filter((r) => (r as { status: string }).status === 'error');
  return { successful: errors.length === 0, data: { results }, error: errors.length === 0 ? null : 'Some toolkits could not be handled' };
}
