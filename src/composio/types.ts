/**
 * The broker's own view of Composio: camelCase, only the fields the broker uses, and never a
 * connected account's credentials, state or tokens. Everything outside `src/composio/` speaks
 * these types; nothing else knows the SDK exists.
 */

/** A connected account's lifecycle, as Composio documents it; the simulator reads this list too. */
export const CONNECTED_ACCOUNT_STATUSES = ['INITIALIZING', 'INITIATED', 'ACTIVE', 'FAILED', 'EXPIRED', 'INACTIVE', 'REVOKED'] as const;

export type ConnectedAccountStatus = (typeof CONNECTED_ACCOUNT_STATUSES)[number];

/** One page of a cursor-paginated Composio list. `nextCursor` is null on the last page. */
export interface Page<T> {
  readonly items: T[];
  readonly nextCursor: string | null;
}

interface PageRequest {
  /** Opaque, from the previous page's `nextCursor`; omit for the first page. */
  readonly cursor?: string | undefined;
  readonly limit: number;
}

/** A Tool Router Session: one per installation, holding its MCP endpoint. */
export interface ToolRouterSession {
  readonly sessionId: string;
  readonly mcpUrl: string;
  /** Whether Composio echoed `multi_account.enable`; a Session without it is replaced. */
  readonly multiAccountEnabled: boolean;
}

export interface SessionToolkit {
  readonly slug: string;
  readonly name: string;
  /** Apps that need no sign-in at all (they are usable without a connected account). */
  readonly isNoAuth: boolean;
  /** The account the Session has selected for this toolkit, if any. */
  readonly connectedAccount: {
    readonly id: string;
    readonly status: ConnectedAccountStatus;
    readonly alias?: string;
  } | null;
}

export interface ConnectedAccount {
  readonly id: string;
  readonly alias: string | null;
  readonly status: ConnectedAccountStatus;
  /** Toolkit slug, e.g. `gmail`. */
  readonly toolkit: string;
  /**
   * The Composio user the account was listed for: the list's `user_ids` filter, which is what
   * proves ownership. Composio's answers no longer name the owner (`user_id` is deprecated).
   */
  readonly userId: string;
  readonly createdAt: string;
}

/** Accounts are only ever listed for one user: the filter is the proof of whose they are. */
export interface ConnectedAccountQuery extends PageRequest {
  readonly userId: string;
  readonly toolkitSlugs?: readonly string[] | undefined;
  readonly statuses?: readonly ConnectedAccountStatus[] | undefined;
  readonly connectedAccountIds?: readonly string[] | undefined;
}

/** A sign-in link for a new connected account (Composio's hosted consent flow). */
export interface ConnectLink {
  readonly url: string;
  /** The account Composio created in `INITIATED` state; it turns `ACTIVE` once the person consents. */
  readonly connectedAccountId: string;
  readonly expiresAt: string | null;
}

export interface TriggerType {
  readonly slug: string;
  readonly toolkit: string;
  readonly name: string;
  readonly description: string;
  /** `poll`: Composio checks the app on an interval; `webhook`: the app pushes events. */
  readonly type: 'webhook' | 'poll';
  /** JSON Schema of the trigger's configuration. */
  readonly configSchema: Record<string, unknown>;
  /** JSON Schema of the events' data. */
  readonly payloadSchema: Record<string, unknown>;
}

interface UpsertTriggerInput {
  readonly userId: string;
  readonly slug: string;
  readonly connectedAccountId: string;
  readonly config: Record<string, unknown>;
}

export interface TriggerInstance {
  /** The public `ti_…` id, also `metadata.trigger_id` in webhooks. */
  readonly id: string;
  readonly triggerSlug: string;
  readonly connectedAccountId: string;
  readonly userId: string | null;
  readonly config: Record<string, unknown>;
  readonly enabled: boolean;
  readonly updatedAt: string | null;
}

interface TriggerQuery extends PageRequest {
  readonly userIds?: readonly string[] | undefined;
  readonly connectedAccountIds?: readonly string[] | undefined;
  readonly triggerIds?: readonly string[] | undefined;
}

interface WebhookSubscription {
  readonly id: string;
  /** True when this call created the subscription; false when it updated the project's existing one. */
  readonly created: boolean;
  /**
   * The signing secret, only from a create: Composio shows it in full only when it makes one
   * (create, `rotate_secret`) and masks it in every other answer, which is never passed on.
   */
  readonly secret?: string;
}

/** Everything the broker asks of Composio. One instance per process; it owns the call budget. */
export interface ComposioGateway {
  // Tool Router Sessions
  createSession(userId: string): Promise<ToolRouterSession>;
  getSession(sessionId: string): Promise<ToolRouterSession>;
  listSessionToolkits(
    sessionId: string,
    page: PageRequest & {
      readonly toolkits?: readonly string[] | undefined;
      /**
       * Only toolkits with a connected account (`true`): a Session holds every toolkit of the
       * catalog (1,000+), so an inventory asks for these rather than sweeping them all.
       */
      readonly isConnected?: boolean | undefined;
    },
  ): Promise<Page<SessionToolkit>>;
  createLink(
    sessionId: string,
    toolkit: string,
    options: { readonly alias?: string | undefined; readonly callbackUrl?: string | undefined },
  ): Promise<ConnectLink>;

  // Connected accounts
  listConnectedAccounts(query: ConnectedAccountQuery): Promise<Page<ConnectedAccount>>;
  /**
   * The account, if it is `userId`'s (one list call filtered by user and id); `null` when it
   * does not exist or is someone else's, which look alike on purpose.
   */
  findConnectedAccount(userId: string, id: string): Promise<ConnectedAccount | null>;
  /** Revokes the account's tokens at the provider (when asked and possible), then deletes it. */
  deleteConnectedAccount(id: string, options: { readonly revoke: boolean }): Promise<{ revoked: boolean }>;

  // Triggers
  getTriggerType(slug: string): Promise<TriggerType>;
  /** Every trigger type of one toolkit (all pages). */
  listTriggerTypes(toolkit: string): Promise<TriggerType[]>;
  upsertTrigger(input: UpsertTriggerInput): Promise<{ triggerId: string }>;
  listActiveTriggers(query: TriggerQuery): Promise<Page<TriggerInstance>>;
  setTriggerEnabled(triggerId: string, enabled: boolean): Promise<void>;
  deleteTrigger(triggerId: string): Promise<void>;

  // The project's webhook subscription
  setWebhookSubscription(url: string): Promise<WebhookSubscription>;
  rotateWebhookSecret(subscriptionId: string): Promise<{ secret: string }>;

  /**
   * Composio's whole toolkit catalog (every page, followed to the end), answered as one page in
   * Composio's own envelope: `{items, next_cursor: null, total_pages: 1, current_page: 1, total_items}`.
   */
  getCatalog(): Promise<unknown>;

  /**
   * Sends one request to a Session's MCP endpoint with the project key, within the call budget
   * and deadline like any other call. The deadline covers the answer's status and headers
   * only: tool calls stream for minutes, so the caller's signal bounds the body. `timeoutMs`,
   * when given, is that deadline in place of the request's Composio one (a tool call may take
   * minutes before its first byte). Composio's own
   * failures (an untrusted host, unreachable, a 404 to a request outside any MCP session, 429,
   * 5xx) are thrown as `ComposioFailure`s; the MCP server's answers come back as they are.
   */
  fetchMcp(
    url: string,
    init: { method: string; headers: Record<string, string>; body?: Uint8Array; signal: AbortSignal; timeoutMs?: number },
  ): Promise<Response>;
  /** Whether a URL (MCP endpoint, consent link) may be handed to or fetched for a client. */
  isTrustedHost(url: string): boolean;
}
