import { deleteAccount } from './accounts.js';
import { findTool, findToolkit, TOOLKITS } from './catalog.js';
import { SimError } from './errors.js';
import { invalidArguments, type MetaTool, metaToolsFor } from './meta-tools.js';
import { createLink, linkWire, sessionToolkitSlugs } from './sessions.js';
import type { AccountRecord, SessionRecord, SimStore } from './store.js';

/**
 * The Tool Router's MCP server, protocol side: JSON-RPC 2.0 messages in, responses out. The
 * HTTP side (Streamable HTTP, JSON or SSE) is in `routes/mcp.ts`. The meta tools a Session
 * lists are in `meta-tools.ts`; their result shapes are plausible reconstructions, not
 * Composio's published contract.
 */

const MCP_PROTOCOL_VERSION = '2025-06-18';
/** The protocol versions the server speaks; another in `MCP-Protocol-Version` is refused (400). */
export const SUPPORTED_PROTOCOL_VERSIONS: readonly string[] = [MCP_PROTOCOL_VERSION, '2025-03-26', '2024-11-05'];

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
          // The client's version when the server speaks it, otherwise the server's own (the client
          // then decides whether it can go on).
          protocolVersion: SUPPORTED_PROTOCOL_VERSIONS.includes(String(message.params?.protocolVersion))
            ? message.params?.protocolVersion
            : MCP_PROTOCOL_VERSION,
          capabilities: { tools: { listChanged: false }, logging: {} },
          serverInfo: { name: 'composio-tool-router', version: 'simulator' },
          instructions:
            'Search with COMPOSIO_SEARCH_TOOLS, run with COMPOSIO_MULTI_EXECUTE_TOOL, connect apps with COMPOSIO_MANAGE_CONNECTIONS.',
        },
      };
    case 'ping':
      return { jsonrpc: '2.0', id, result: {} };
    case 'tools/list':
      return { jsonrpc: '2.0', id, result: { tools: metaToolsFor(session.config) } };
    case 'tools/call':
      return callTool(store, session, id, message.params ?? {});
    default:
      return { jsonrpc: '2.0', id, error: { code: RpcError.methodNotFound, message: `Method not found: ${message.method}` } };
  }
}

function callTool(store: SimStore, session: SessionRecord, id: string | number | null, params: Record<string, unknown>): JsonRpcResponse {
  const name = params.name;
  // Only the tools this Session lists can be called.
  const tool = metaToolsFor(session.config).find((t) => t.name === name);
  if (!tool) return { jsonrpc: '2.0', id, error: { code: RpcError.invalidParams, message: `Unknown tool: ${String(name)}` } };
  const args = typeof params.arguments === 'object' && params.arguments !== null ? (params.arguments as Record<string, unknown>) : {};
  const invalid = invalidArguments(tool, args);
  // As MCP servers answer input that does not fit the schema: a tool error the model can read.
  if (invalid !== undefined) {
    return {
      jsonrpc: '2.0',
      id,
      result: { content: [{ type: 'text', text: `Input validation error: ${invalid}` }], isError: true },
    };
  }
  const result = runTool(store, session, tool, args);
  return {
    jsonrpc: '2.0',
    id,
    result: { content: [{ type: 'text', text: JSON.stringify(result) }], isError: !result.successful },
  };
}

type ToolResult = { successful: boolean; data: unknown; error: string | null };

function runTool(store: SimStore, session: SessionRecord, tool: MetaTool, args: Record<string, unknown>): ToolResult {
  switch (tool.name) {
    case 'COMPOSIO_SEARCH_TOOLS':
      return searchTools(store, session, args);
    case 'COMPOSIO_MULTI_EXECUTE_TOOL':
      return multiExecute(store, session, args);
    case 'COMPOSIO_MANAGE_CONNECTIONS':
      return manageConnections(store, session, args);
    case 'COMPOSIO_WAIT_FOR_CONNECTIONS':
      return waitForConnections(store, session, args);
    case 'COMPOSIO_GET_TOOL_SCHEMAS':
      return toolSchemas(args);
    case 'COMPOSIO_REMOTE_WORKBENCH':
    case 'COMPOSIO_REMOTE_BASH_TOOL':
      // No sandbox here: the call is accepted and answered, nothing runs.
      return { successful: true, data: { simulated: true, stdout: '', stderr: '', results: [] }, error: null };
  }
}

/** Answers at once with where each sign-in stands (the simulator does not hold the call open). */
function waitForConnections(store: SimStore, session: SessionRecord, args: Record<string, unknown>): ToolResult {
  const toolkits = (args.toolkits as unknown[]).filter((t): t is string => typeof t === 'string').map((t) => t.toLowerCase());
  return { successful: true, data: { statuses: toolkits.map((t) => connectionStatus(store, session, t)) }, error: null };
}

function toolSchemas(args: Record<string, unknown>): ToolResult {
  const slugs = (args.tool_slugs as unknown[]).filter((t): t is string => typeof t === 'string');
  const schemas = Object.fromEntries(
    slugs.flatMap((slug) => {
      const found = findTool(slug);
      if (!found) return [];
      return [
        [
          slug,
          {
            tool_slug: slug,
            toolkit: found.toolkit.slug,
            description: found.tool.description,
            input_schema: found.tool.inputSchema,
            hasFullSchema: true,
          },
        ],
      ];
    }),
  );
  const missing = slugs.filter((slug) => !(slug in schemas));
  return {
    successful: missing.length === 0,
    data: { tool_schemas: schemas },
    error: missing.length === 0 ? null : `Tools not found: ${missing.join(', ')}`,
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
