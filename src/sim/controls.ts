import { ACCOUNT_STATUSES, createAccount, expireAbandonedSignIns } from './accounts.js';
import type { SimContext } from './context.js';
import { badRequest } from './errors.js';
import { type DisabledTrigger, disableTriggerByComposio, expireAccount, fireTrigger } from './events.js';
import type { FaultSpec, RecordedRequest } from './faults.js';
import { answerConsent } from './sessions.js';
import type { AccountStatus } from './store.js';
import { reviveReconnectedTriggers } from './triggers.js';
import { type DeliveryResult, getSubscription } from './webhooks.js';
import { accountWire, authConfigWire, type SessionConfigWire, triggerInstanceWire } from './wire.js';

/**
 * What a developer can do to the simulated world, in process. The `/_sim/…` HTTP controls and
 * pages call exactly these, so tests and people drive the same code.
 */

/** An account as the API shows it, and always with its user: the simulator's own view names it. */
type SimAccountView = ReturnType<typeof accountWire> & { user_id: string };

interface SimStateDump {
  readonly project: { readonly id: string; readonly orgId: string };
  readonly sessions: { id: string; userId: string; mcpUrl: string; config: SessionConfigWire; createdAt: string }[];
  readonly accounts: SimAccountView[];
  readonly links: {
    token: string;
    consentUrl: string;
    toolkit: string;
    alias: string | null;
    userId: string;
    connectedAccountId: string;
    outcome: string;
    expiresAt: string;
  }[];
  readonly authConfigs: ReturnType<typeof authConfigWire>[];
  readonly triggers: ReturnType<typeof triggerInstanceWire>[];
  /** Without secrets. */
  readonly webhookSubscriptions: { id: string; webhookUrl: string; version: string; enabledEvents: string[]; createdAt: string }[];
  readonly faults: unknown[];
  readonly mcpStreaming: {
    chunks: number;
    intervalMs: number;
    remaining: number | null;
    breakAfter: number | null;
    as: 'json' | 'sse';
  } | null;
}

export interface SimulatorControls {
  /** The person clicks Authorize on the consent page: the link's account becomes ACTIVE. */
  authorizeLink(linkToken: string): SimAccountView;
  /** The person clicks Deny: the link's account becomes FAILED. */
  denyLink(linkToken: string): SimAccountView;
  /**
   * The account's sign-in lapses: EXPIRED, plus a signed `composio.connected_account.expired`
   * webhook; its running triggers are disabled by Composio with `connection_expired` (each a
   * `composio.trigger.disabled` webhook, when subscribed), and run again once it is ACTIVE.
   */
  expireAccount(
    accountId: string,
  ): Promise<{ account: SimAccountView; delivery: DeliveryResult | null; triggersDisabled: DisabledTrigger[] }>;
  /**
   * The trigger's app produces an event: a signed `composio.trigger.message` webhook, redelivered
   * until answered 2xx. A Gmail trigger's query applies: mail it excludes is not sent
   * (`excludedByQuery`).
   */
  fireTrigger(triggerId: string, data?: Record<string, unknown>): Promise<DeliveryResult>;
  /**
   * Composio stops a running trigger by itself (`reason`: `subscription_auth_failure`, …): a
   * signed `composio.trigger.disabled` webhook when the subscription asked for it.
   */
  disableTrigger(triggerId: string, reason: string): Promise<DisabledTrigger>;
  /** Adds an account directly (seeding), without the consent flow. */
  createAccount(input: { userId: string; toolkit: string; alias?: string; status?: AccountStatus }): SimAccountView;
  /** Moves the simulator's time forward; sign-ins older than ten minutes are then abandoned. */
  advanceClock(ms: number): void;
  injectFault(spec: FaultSpec): void;
  clearFaults(): void;
  /**
   * Makes the next MCP answers arrive in `chunks` pieces, `intervalMs` apart (`null` clears);
   * with `breakAfter`, the connection drops after that many pieces; `as: 'json'` sends one JSON
   * body in pieces instead of SSE events (the default).
   */
  setMcpStreaming(spec: { chunks: number; intervalMs: number; times?: number; breakAfter?: number; as?: 'json' | 'sse' } | null): void;
  /** Requests that reached the Composio routes (API and MCP), oldest first. */
  requests(): readonly RecordedRequest[];
  clearRequests(): void;
  state(): SimStateDump;
  /**
   * The subscription's signing secret in full, as the simulator signs with it. The API shows it
   * only on create and rotate; the sandbox, which is the simulator, reads its own after a restart.
   */
  webhookSecret(subscriptionId: string): string;
}

export function createControls(ctx: SimContext): SimulatorControls {
  const { store } = ctx;
  const view = (account: Parameters<typeof accountWire>[1]): SimAccountView => ({
    ...accountWire(store, account, { withState: false }),
    user_id: account.userId,
  });
  // A change made in process is kept in the background (the HTTP controls wait for it).
  const kept = <T>(value: T): T => {
    void ctx.persist();
    return value;
  };
  return {
    authorizeLink: (token) => kept(view(answerConsent(store, token, 'authorize').account)),
    denyLink: (token) => kept(view(answerConsent(store, token, 'deny').account)),
    expireAccount: async (id) => {
      const { account, delivery, triggersDisabled } = await expireAccount(store, id);
      return kept({ account: view(account), delivery, triggersDisabled });
    },
    fireTrigger: (id, data) => fireTrigger(store, id, data),
    disableTrigger: async (id, reason) => kept(await disableTriggerByComposio(store, id, reason)),
    createAccount: (input) => {
      if (input.status !== undefined && !ACCOUNT_STATUSES.includes(input.status)) {
        throw badRequest(`status must be one of ${ACCOUNT_STATUSES.join(', ')}`);
      }
      return kept(view(createAccount(store, input)));
    },
    advanceClock: (ms) => {
      if (!Number.isFinite(ms) || ms < 0) throw badRequest('ms must be a positive number');
      store.advanceClock(ms);
      expireAbandonedSignIns(store);
      void ctx.persist();
    },
    injectFault: (spec) => ctx.faults.add(spec),
    clearFaults: () => ctx.faults.clear(),
    setMcpStreaming: (spec) => {
      if (spec === null) {
        ctx.mcpStreaming = null;
        return;
      }
      if (!Number.isInteger(spec.chunks) || spec.chunks < 2 || spec.chunks > 100) throw badRequest('chunks must be 2-100');
      if (!(spec.intervalMs >= 0) || spec.intervalMs > 60_000) throw badRequest('intervalMs must be 0-60000');
      const breakAfter = spec.breakAfter ?? null;
      if (breakAfter !== null && (!Number.isInteger(breakAfter) || breakAfter < 1 || breakAfter >= spec.chunks)) {
        throw badRequest('breakAfter must be 1 to chunks - 1');
      }
      const as = spec.as ?? 'sse';
      if (as !== 'json' && as !== 'sse') throw badRequest('as must be json or sse');
      ctx.mcpStreaming = { chunks: spec.chunks, intervalMs: spec.intervalMs, remaining: spec.times ?? null, breakAfter, as };
    },
    webhookSecret: (id) => getSubscription(store, id).secret,
    requests: () => ctx.requests.list(),
    clearRequests: () => ctx.requests.clear(),
    state: () => {
      expireAbandonedSignIns(store);
      reviveReconnectedTriggers(store);
      return dump();
    },
  };

  function dump(): SimStateDump {
    return {
      project: { id: store.projectId, orgId: store.orgId },
      sessions: [...store.sessions.values()].map((s) => ({
        id: s.id,
        userId: s.userId,
        mcpUrl: store.mcpUrl(s.id),
        config: s.config,
        createdAt: s.createdAt,
      })),
      accounts: [...store.accounts.values()].sort((a, b) => b.seq - a.seq).map(view),
      links: [...store.links.values()].map((l) => ({
        token: l.token,
        consentUrl: store.consentUrl(l.token),
        toolkit: l.toolkit,
        alias: l.alias,
        userId: l.userId,
        connectedAccountId: l.accountId,
        outcome: l.outcome,
        expiresAt: l.expiresAt.toISOString(),
      })),
      authConfigs: [...store.authConfigs.values()].map((c) => authConfigWire(store, c)),
      triggers: [...store.triggers.values()].map((t) => triggerInstanceWire(store, t)),
      webhookSubscriptions: [...store.subscriptions.values()].map((s) => ({
        id: s.id,
        webhookUrl: s.webhookUrl,
        version: s.version,
        enabledEvents: s.enabledEvents,
        createdAt: s.createdAt,
      })),
      faults: ctx.faults.list(),
      mcpStreaming: ctx.mcpStreaming ? { ...ctx.mcpStreaming } : null,
    };
  }
}
