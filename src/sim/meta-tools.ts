import type { SessionConfigWire } from './store.js';

/**
 * The Tool Router's meta tools as a Session lists them (composio-api.md §10 row 10): which ones
 * depend on the Session's config, and each one's input schema with the fields Composio
 * requires. Names and the conditions are the v3.1 types'; descriptions and the optional fields
 * are plausible reconstructions, not Composio's published contract.
 */

export type MetaToolName =
  | 'COMPOSIO_SEARCH_TOOLS'
  | 'COMPOSIO_MULTI_EXECUTE_TOOL'
  | 'COMPOSIO_MANAGE_CONNECTIONS'
  | 'COMPOSIO_WAIT_FOR_CONNECTIONS'
  | 'COMPOSIO_REMOTE_WORKBENCH'
  | 'COMPOSIO_REMOTE_BASH_TOOL'
  | 'COMPOSIO_GET_TOOL_SCHEMAS';

export interface MetaTool {
  readonly name: MetaToolName;
  readonly description: string;
  readonly inputSchema: { type: 'object'; properties: Record<string, unknown>; required: readonly string[] };
}

/** How many tools one `COMPOSIO_MULTI_EXECUTE_TOOL` call may run. */
const MULTI_EXECUTE_MAX_TOOLS = 50;

const strings = { type: 'array', items: { type: 'string' } };

/** In the v3.1 enum's order. */
const ALL: readonly MetaTool[] = [
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
          minItems: 1,
          maxItems: MULTI_EXECUTE_MAX_TOOLS,
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
        sync_response_to_workbench: {
          type: 'boolean',
          description: 'Also store the responses in the remote workbench, for large results.',
        },
        thought: { type: 'string' },
        current_step: { type: 'string' },
      },
      required: ['tools', 'sync_response_to_workbench'],
    },
  },
  {
    name: 'COMPOSIO_MANAGE_CONNECTIONS',
    description: 'Connect an app (returns a sign-in link), reconnect a signed-out one, or remove an account.',
    inputSchema: {
      type: 'object',
      properties: {
        toolkits: strings,
        action: { type: 'string', enum: ['connect', 'remove'] },
        alias: { type: 'string', description: 'Label for a new account' },
        account: { type: 'string', description: 'Account id or alias to remove' },
        reinitiate_all: { type: 'boolean' },
      },
      required: ['toolkits'],
    },
  },
  {
    name: 'COMPOSIO_WAIT_FOR_CONNECTIONS',
    description: 'Wait until the person has finished signing in to the named apps.',
    inputSchema: { type: 'object', properties: { toolkits: strings, timeout_seconds: { type: 'number' } }, required: ['toolkits'] },
  },
  {
    name: 'COMPOSIO_REMOTE_WORKBENCH',
    description: 'Run Python in the remote workbench (for large tool results and bulk work).',
    inputSchema: {
      type: 'object',
      properties: { code_to_execute: { type: 'string' }, thought: { type: 'string' } },
      required: ['code_to_execute'],
    },
  },
  {
    name: 'COMPOSIO_REMOTE_BASH_TOOL',
    description: 'Run a shell command in the remote workbench.',
    inputSchema: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] },
  },
  {
    name: 'COMPOSIO_GET_TOOL_SCHEMAS',
    description: 'The full input schemas of tools COMPOSIO_SEARCH_TOOLS named.',
    inputSchema: { type: 'object', properties: { tool_slugs: strings }, required: ['tool_slugs'] },
  },
];

/** Whether a Session with `config` lists `name`. */
function listed(config: SessionConfigWire, name: MetaToolName): boolean {
  const search = config.search as { enable?: boolean };
  const execute = config.execute as { enable_multi_execute?: boolean };
  switch (name) {
    case 'COMPOSIO_SEARCH_TOOLS':
      return search.enable !== false;
    case 'COMPOSIO_MULTI_EXECUTE_TOOL':
      return execute.enable_multi_execute !== false;
    case 'COMPOSIO_MANAGE_CONNECTIONS':
      return config.manage_connections.enabled;
    case 'COMPOSIO_WAIT_FOR_CONNECTIONS':
      return config.manage_connections.enabled && config.manage_connections.enable_wait_for_connections;
    case 'COMPOSIO_REMOTE_WORKBENCH':
    case 'COMPOSIO_REMOTE_BASH_TOOL':
      return config.workbench.enable;
    case 'COMPOSIO_GET_TOOL_SCHEMAS':
      return true;
  }
}

/** The meta tools a Session with `config` lists, as `tools/list` shows them. */
export function metaToolsFor(config: SessionConfigWire): MetaTool[] {
  return ALL.filter((tool) => listed(config, tool.name));
}

/** Their names, as a Session's `tool_router_tools`. */
export function metaToolNames(config: SessionConfigWire): MetaToolName[] {
  return metaToolsFor(config).map((tool) => tool.name);
}

/**
 * Why `args` do not fit the tool's input schema, or undefined when they do: every required
 * field present with its type, and `COMPOSIO_MULTI_EXECUTE_TOOL`'s `tools` 1–50 items of
 * `{tool_slug, arguments}`.
 */
export function invalidArguments(tool: MetaTool, args: Record<string, unknown>): string | undefined {
  const properties = tool.inputSchema.properties as Record<string, { type?: string }>;
  for (const field of tool.inputSchema.required) {
    const value = args[field];
    if (value === undefined || value === null) return `${field} is required`;
    const type = properties[field]?.type;
    if (type === 'array' && !Array.isArray(value)) return `${field} must be an array`;
    if (type === 'boolean' && typeof value !== 'boolean') return `${field} must be a boolean`;
    if (type === 'string' && typeof value !== 'string') return `${field} must be a string`;
  }
  if (tool.name !== 'COMPOSIO_MULTI_EXECUTE_TOOL') return undefined;
  const tools = args.tools as unknown[];
  if (tools.length < 1 || tools.length > MULTI_EXECUTE_MAX_TOOLS) return `tools must have 1 to ${MULTI_EXECUTE_MAX_TOOLS} items`;
  for (const [index, item] of tools.entries()) {
    const call = item as { tool_slug?: unknown; arguments?: unknown } | null;
    if (typeof call !== 'object' || call === null || Array.isArray(call)) return `tools[${index}] must be an object`;
    if (typeof call.tool_slug !== 'string' || call.tool_slug === '') return `tools[${index}].tool_slug is required`;
    if (typeof call.arguments !== 'object' || call.arguments === null || Array.isArray(call.arguments)) {
      return `tools[${index}].arguments is required (an object)`;
    }
  }
  return undefined;
}
