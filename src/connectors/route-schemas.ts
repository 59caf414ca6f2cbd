import { z } from 'zod';
import { settingText } from '../config.js';
import { describedHeaders, empty, installationToken, json, refusal, refusals } from '../http/responses.js';
import { Alias, ConnectedAccountId, ToolkitSlug } from './patterns.js';

/**
 * What the connected-app routes (src/connectors/routes.ts) take and answer: the schemas that
 * validate and serialise them, and their part of the reference (openapi.yaml).
 */

const minutes = (ms: number) => `${ms / 60_000} minutes`;
const mebibytes = (bytes: number) => `${bytes / 1024 / 1024} MiB`;

const SlugParams = z.object({ slug: ToolkitSlug });
const AccountParams = z.object({ slug: ToolkitSlug, accountId: ConnectedAccountId });
const ServicesQuery = z.object({
  services: z
    .string()
    .transform((s) => [
      ...new Set(
        s
          .split(',')
          .map((x) => x.trim())
          .filter(Boolean),
      ),
    ])
    .pipe(z.array(ToolkitSlug).min(1, 'must name at least one service').max(100, 'must name at most 100 services'))
    .meta({ description: 'Comma-separated toolkit slugs, e.g. `gmail,slack`.' }),
});
const AuthorizeBody = z
  .object({ alias: Alias.optional().meta({ description: "The account's label, e.g. work.", minLength: 1, maxLength: 64 }) })
  .strict();

const AccountStatus = z.enum(['INITIALIZING', 'INITIATED', 'ACTIVE', 'FAILED', 'EXPIRED', 'INACTIVE', 'REVOKED']);
const Service = z
  .object({
    connected: z.boolean().describe('An ACTIVE account, or an app that needs no sign-in.'),
    pending: z.boolean().describe('A sign-in was started and not finished.'),
    status: z.union([AccountStatus, z.literal('NOT_CONNECTED')]).meta({
      type: 'string',
      description: "`ACTIVE` when connected, otherwise the newest account's status, or `NOT_CONNECTED`.",
    }),
    accounts: z.array(z.object({ id: z.string(), alias: z.string().optional(), status: AccountStatus })),
  })
  .meta({ id: 'Service' });
const Services = z.record(z.string(), Service);
const Removed = z.object({ removed: z.literal([0, 1]) }).meta({ id: 'Removed' });
const SignInLink = z.object({
  url: z.string().meta({ format: 'uri' }),
  connectedAccountId: z.string(),
  alias: z.string().nullable().describe("The new account's label; `null` for a first connection, which gets none."),
  expiresAt: z.string().nullable().meta({ format: 'date-time' }),
});

/** Every route here answers these the same way. */
const refused = {
  401: refusals.unauthorized,
  403: refusals.installationDisabled,
  429: refusals.installationRateLimited,
  502: refusals.composioFailed,
  503: refusals.composioFailed,
};

/** `GET /v1/connectors/connected` */
export const connected = {
  tags: ['connected apps'],
  summary: 'The whole multi-account inventory',
  description:
    "Every connected account of the installation's Composio user (Composio's list filtered by that user, all pages), merged with the account the Session has selected for each toolkit that has one (the Session's toolkits filtered by `is_connected`, not all 1,000+ of them) and with the apps that need no sign-in (from the shared, cached toolkit catalog). Two to three Composio calls however many toolkits Composio has (three while the catalog is not cached). Falls back to the Session's view when the project key may not list accounts. Only ids, labels and statuses are shown.",
  security: installationToken,
  response: {
    200: json('Every app with an account (or needing none).', z.object({ configured: z.literal(true), services: Services })),
    ...refused,
    404: refusal('Composio does not find what the inventory asked for (`composio_not_found`); `error` says what.'),
    422: refusal('Composio refused to list the accounts; `error` carries its sentence saying why.'),
  },
};

/** `GET /v1/connectors` */
export const some = {
  tags: ['connected apps'],
  summary: 'The inventory of some apps',
  security: installationToken,
  querystring: ServicesQuery,
  response: {
    200: json('One key per asked slug.', z.object({ services: Services })),
    400: refusals.badRequest,
    ...refused,
  },
};

/** `POST /v1/connectors/:slug/authorize` */
export const signIn = {
  tags: ['connected apps'],
  summary: 'A sign-in link for one more account of an app',
  description:
    "A label is required only beside an `ACTIVE` account (or one whose status Composio did not report); a first connection (no account of the app at all) gets no label; while accounts exist but none works, an unlabelled retry gets a unique `omb-retry-…` label. A label held only by accounts that don't work is freed (revoked, deleted) and reused; a label a working account holds is `409 alias_taken`. At most five usable accounts per app (`409 too_many_accounts`); a sign-in not finished within its link's ten minutes is abandoned and does not count, whatever status Composio gives it (`EXPIRED`, `FAILED`, or still `INITIATED`). Links are only ever on `composio.dev` (or the configured Composio host).",
  security: installationToken,
  params: SlugParams,
  body: AuthorizeBody,
  response: {
    200: json('Open `url` in a browser to sign in.', SignInLink),
    400: refusals.badRequest,
    401: refusals.unauthorized,
    403: refusals.installationDisabled,
    409: refusal('The label is taken by a working account, or the app has five usable accounts.'),
    415: refusals.notJson,
    422: refusal(
      'The app has no Composio-managed sign-in (`auth_config_required`); the owner can add their own Composio project key in Settings → API keys.',
    ),
    404: refusal('Composio does not know the app (`composio_not_found`).'),
    429: refusals.installationRateLimited,
    502: refusals.composioFailed,
    503: refusals.composioFailed,
  },
};

/** `DELETE /v1/connectors/:slug` */
export const disconnectOne = {
  tags: ['connected apps'],
  summary: 'Disconnect the account the Session has selected for an app',
  security: installationToken,
  params: SlugParams,
  response: {
    200: json('Revoked and deleted (1), or nothing to remove (0).', Removed),
    400: refusals.badRequest,
    ...refused,
  },
};

/** `DELETE /v1/connectors/:slug/accounts/:accountId` */
export const disconnectById = {
  tags: ['connected apps'],
  summary: 'Disconnect one account',
  description:
    "Ownership is proven with Composio before anything is revoked: the account must be in Composio's list of this installation's own Composio user (its answers no longer name a user); another installation's id removes nothing (`removed 0`).",
  security: installationToken,
  params: AccountParams,
  response: {
    200: json("Revoked and deleted (1), or not this installation's (0).", Removed),
    400: refusals.badRequest,
    ...refused,
  },
};

/** `GET /v1/catalog` */
export const catalogPage = {
  tags: ['connected apps'],
  summary: "Composio's toolkit catalog",
  description:
    "Composio's whole toolkit catalog (`/api/v3/toolkits?sort_by=usage`, every page followed, 1,000 toolkits a page), as one page in Composio's own envelope and order (`next_cursor: null`, `total_items` the number of toolkits); the items are Composio's as-is. Shared by every installation and cached for 10 minutes, when it costs no Composio call; a cached copy is served while Composio is briefly down.",
  security: installationToken,
  response: {
    // Composio's page is passed on whole: it is the one answer not narrowed to named fields.
    200: json('The whole catalog as one page; `age` says how old the copy is.', z.unknown()),
    ...refused,
  },
};

// The MCP body and answer are bytes passed through: declared for the reference, never parsed
// or serialised here.
const mcpHeaders = (required: boolean) => describedHeaders({ 'mcp-session-id': { required, description: 'Passed both ways.' } });
const mcpSessionUnknown = refusal(
  "An `mcp-session-id` Composio did not give this installation, or one that has ended (`mcp_session_not_found`), answered here without reaching Composio; or the MCP server's own `404` for an expired MCP session. Either way: initialize a new MCP session.",
);
const mcpRefused = {
  ...refused,
  429: refusal(
    `More than the per-installation budget of MCP requests a minute, ${settingText('MCP_REQUESTS_PER_MINUTE')}, apart from the connected-app budget; notifications and pings do not count.`,
  ),
  502: refusal(
    `Composio is down or refused (\`upstream_unavailable\`), or the MCP server sent no status within ${settingText('MCP_TIMEOUT_MS', minutes)}; a streamed answer that goes silent that long is cut off. \`error\` is readable.`,
  ),
};

/** `POST /v1/mcp` */
export const mcpPost = {
  tags: ['connected apps'],
  summary: "The installation's tools over MCP (Streamable HTTP)",
  description: `A streaming proxy to the installation's Session MCP endpoint, with the project key added here. \`mcp-session-id\`, \`mcp-protocol-version\` and \`accept\` are passed on; \`mcp-session-id\` comes back. An \`initialize\` always starts a new MCP session, whatever \`mcp-session-id\` it carries (a stale one included). Server-sent events are streamed as they arrive. A tool call may take minutes: the MCP server has ${settingText('MCP_TIMEOUT_MS', minutes)} to start its answer, and a stream that keeps sending is never cut. Bodies over ${settingText('MCP_BODY_LIMIT_BYTES', mebibytes)} get \`413\`. A signed-out account's error carries a note telling the bot to call \`COMPOSIO_MANAGE_CONNECTIONS\`.`,
  security: installationToken,
  headers: describedHeaders({
    'mcp-session-id': { required: false, description: 'Passed both ways; ignored on `initialize`.' },
    'mcp-protocol-version': { required: false, description: 'Passed on; one the MCP server does not speak gets its `400`.' },
    accept: {
      required: false,
      description: 'Passed on; must name both `application/json` and `text/event-stream` (else the MCP server’s `406`).',
    },
  }),
  // Declared for the reference; any bytes pass (they are checked upstream, not here).
  body: z.unknown().describe('A JSON-RPC message.'),
  response: {
    200: {
      description: 'The upstream answer as-is (JSON or `text/event-stream`).',
      content: { 'application/json': { schema: z.unknown() }, 'text/event-stream': { schema: z.string() } },
    },
    202: empty('A notification or an answer to the server, accepted (no body).'),
    400: json(
      "The MCP server's own refusal of the message (a JSON-RPC error), passed on as it is: a malformed message, a missing `mcp-session-id`, an `mcp-protocol-version` it does not speak.",
      z.unknown(),
    ),
    ...mcpRefused,
    404: mcpSessionUnknown,
    406: json(
      "The MCP server's refusal of an `accept` that lacks `application/json` or `text/event-stream` (a JSON-RPC error), passed on as it is.",
      z.unknown(),
    ),
    413: refusals.tooLarge,
  },
};

/** `DELETE /v1/mcp` */
export const mcpDelete = {
  tags: ['connected apps'],
  summary: 'End an MCP session',
  security: installationToken,
  headers: mcpHeaders(true),
  response: {
    200: empty('Ended. The MCP server answers this without a body.'),
    ...mcpRefused,
    404: mcpSessionUnknown,
  },
};

/** `GET /v1/mcp` */
export const mcpGet = {
  tags: ['connected apps'],
  summary: 'No server-initiated stream',
  description:
    'Streamable HTTP lets a client open a stream for server-initiated messages with `GET`; this endpoint offers none, so it answers `405` with `allow: POST, DELETE`, as the MCP spec says, without calling Composio.',
  security: installationToken,
  headers: mcpHeaders(false),
  response: {
    401: refusals.unauthorized,
    403: refusals.installationDisabled,
    405: refusal('Always (`method_not_allowed`), with `allow: POST, DELETE`.'),
    429: mcpRefused[429],
  },
};
