import type { ConnectedAccountStatus } from '../composio/types.js';
import { nanoId } from './ids.js';

/**
 * The simulator's world, one per simulator instance, held in memory (and, in sandbox mode, kept
 * in Postgres by `persistence.ts`). Records are the simulator's own; `wire.ts` turns them into
 * Composio's shapes.
 */

/**
 * The Session `config` as Composio answers it (`enabled`/`disabled`, where requests say
 * `enable`). Defined with the records because a Session record keeps it in this shape.
 */
export interface SessionConfigWire {
  user_id: string;
  toolkits?: { enabled: string[] } | { disabled: string[] };
  auth_configs?: Record<string, string>;
  connected_accounts?: Record<string, string[]>;
  manage_connections: {
    enabled: boolean;
    callback_url?: string;
    enable_wait_for_connections: boolean;
    enable_connection_removal: boolean;
  };
  multi_account?: { enable: boolean; max_accounts_per_toolkit: number; require_explicit_selection: boolean };
  workbench: { enable: boolean; proxy_execution_enabled: boolean; auto_offload_threshold: number; sandbox_size: string };
  preload: { tools: string[] };
  search: Record<string, never>;
  execute: Record<string, never>;
}

export type AccountStatus = ConnectedAccountStatus;

export interface SessionRecord {
  readonly id: string;
  readonly userId: string;
  readonly config: SessionConfigWire;
  readonly createdAt: string;
}

export interface AccountRecord {
  readonly id: string;
  readonly uuid: string;
  readonly wordId: string;
  readonly userId: string;
  readonly toolkit: string;
  readonly authConfigId: string;
  readonly alias: string | null;
  status: AccountStatus;
  statusReason: string | null;
  /** Made-up provider tokens, present once the account is ACTIVE (never shown in `/_sim/state`). */
  accessToken: string | null;
  readonly createdAt: string;
  updatedAt: string;
  /** Creation order, for stable newest-first lists. */
  readonly seq: number;
}

export interface LinkRecord {
  readonly token: string;
  readonly accountId: string;
  readonly sessionId: string;
  readonly userId: string;
  readonly toolkit: string;
  readonly alias: string | null;
  readonly callbackUrl: string | null;
  readonly expiresAt: Date;
  outcome: 'pending' | 'authorized' | 'denied';
}

export interface AuthConfigRecord {
  readonly id: string;
  readonly uuid: string;
  readonly toolkit: string;
  readonly authScheme: string;
  readonly isComposioManaged: boolean;
  readonly createdAt: string;
}

export interface TriggerRecord {
  readonly id: string;
  readonly uuid: string;
  readonly slug: string;
  readonly userId: string;
  readonly connectedAccountId: string;
  readonly config: Record<string, unknown>;
  disabledAt: string | null;
  /**
   * Why Composio disabled the trigger by itself (`connection_expired`, …); null or absent when it
   * runs, or when the project disabled it.
   */
  disabledReason?: string | null;
  updatedAt: string;
  readonly seq: number;
}

export interface SubscriptionRecord {
  readonly id: string;
  webhookUrl: string;
  version: 'V1' | 'V2' | 'V3';
  enabledEvents: string[];
  secret: string;
  readonly createdAt: string;
  updatedAt: string;
}

export interface McpSessionRecord {
  readonly id: string;
  readonly toolRouterSessionId: string;
}

/**
 * The whole world as plain data, for keeping it across restarts (`persistence.ts`): records by
 * kind, each as the simulator holds it (a link's expiry as an ISO string).
 */
export interface SimSnapshot {
  readonly apiKey: string;
  readonly projectId: string;
  readonly orgId: string;
  readonly seq: number;
  readonly records: SimRecords;
}

export interface SimRecords {
  readonly session: SessionRecord[];
  readonly account: AccountRecord[];
  readonly link: (Omit<LinkRecord, 'expiresAt'> & { expiresAt: string })[];
  readonly auth_config: AuthConfigRecord[];
  readonly trigger: TriggerRecord[];
  readonly subscription: SubscriptionRecord[];
  readonly mcp_session: McpSessionRecord[];
}

/** The readings of Composio's undocumented or contested behaviour this simulator answers with. */
export interface SimReadings {
  /**
   * Connected accounts in list and get answers (and the expiry event's `data`) name their
   * `user_id`. Composio deprecates it ("we will not be providing userId from this api anymore")
   * and its documented expiry event has none: strict is `false`.
   */
  accountUserIds: boolean;
  /**
   * The status a sign-in takes once its connect link expired unused (ten minutes; the
   * `status_reason` is Composio's). Undocumented: strict is `EXPIRED`; `FAILED`, or `INITIATED`
   * (the status kept, only the reason set), are the other readings.
   */
  abandonedSignIn: 'EXPIRED' | 'FAILED' | 'INITIATED';
  /**
   * How a delete of a trigger already gone (deleted, or removed with its account) is answered:
   * the spec names both 409 "already deleted" and 410 "already gone"; 409 by default.
   */
  deletedTrigger: 409 | 410;
  /**
   * An MCP `initialize` that carries an `mcp-session-id`: `refuse` (400, as the official SDK's
   * server answers one addressed to a session already initialized, or unknown), or `new` (a new
   * MCP session, the id ignored). The spec says only that a new `initialize` starts a new session.
   */
  mcpInitializeWithSessionId: 'refuse' | 'new';
}

const STRICT_READINGS: Readonly<SimReadings> = {
  accountUserIds: false,
  abandonedSignIn: 'EXPIRED',
  deletedTrigger: 409,
  mcpInitializeWithSessionId: 'refuse',
};

export class SimStore {
  /** Set once the server listens; every URL the simulator hands out is on this origin. */
  origin = '';
  projectId = nanoId('pr');
  orgId = nanoId('ok');
  readonly sessions = new Map<string, SessionRecord>();
  readonly accounts = new Map<string, AccountRecord>();
  readonly links = new Map<string, LinkRecord>();
  readonly authConfigs = new Map<string, AuthConfigRecord>();
  readonly triggers = new Map<string, TriggerRecord>();
  readonly subscriptions = new Map<string, SubscriptionRecord>();
  readonly mcpSessions = new Map<string, McpSessionRecord>();
  /**
   * Every trigger id handed out, so that a delete of one already gone (deleted, or removed with
   * its account) answers "already deleted" rather than "not found". Not kept across restarts.
   */
  readonly issuedTriggerIds = new Set<string>();
  /** Waits before each redelivery of a webhook not answered 2xx (server options; short in tests). */
  redeliveryDelaysMs: readonly number[] = [];
  /** Aborted when the simulator closes: redeliveries still waiting are dropped. */
  closing: AbortSignal = new AbortController().signal;
  private seq = 0;
  /** How far tests moved the simulator's time ahead of its clock (`advanceClock`). */
  private aheadMs = 0;
  /**
   * Where Composio's sources disagree or are silent, the simulator takes the strictest reading;
   * a test may select a kinder one to show the broker works with it too.
   */
  readonly readings: SimReadings = { ...STRICT_READINGS };

  constructor(
    readonly apiKey: string,
    private readonly clock: () => Date = () => new Date(),
  ) {}

  now(): Date {
    return new Date(this.clock().getTime() + this.aheadMs);
  }

  nowIso(): string {
    return this.now().toISOString();
  }

  /** Moves the simulator's time forward (tests: a sign-in abandoned for ten minutes). */
  advanceClock(ms: number): void {
    this.aheadMs += ms;
  }

  nextSeq(): number {
    this.seq += 1;
    return this.seq;
  }

  snapshot(): SimSnapshot {
    const copy = <T>(records: Iterable<T>): T[] => [...records].map((r) => structuredClone(r));
    return {
      apiKey: this.apiKey,
      projectId: this.projectId,
      orgId: this.orgId,
      seq: this.seq,
      records: {
        session: copy(this.sessions.values()),
        account: copy(this.accounts.values()),
        link: [...this.links.values()].map((l) => ({ ...structuredClone(l), expiresAt: l.expiresAt.toISOString() })),
        auth_config: copy(this.authConfigs.values()),
        trigger: copy(this.triggers.values()),
        subscription: copy(this.subscriptions.values()),
        mcp_session: copy(this.mcpSessions.values()),
      },
    };
  }

  /** Takes up a world kept earlier (the same project: its key must match). */
  restore(snapshot: SimSnapshot): void {
    if (snapshot.apiKey !== this.apiKey) throw new Error('the kept simulator state belongs to another project key');
    this.projectId = snapshot.projectId;
    this.orgId = snapshot.orgId;
    this.seq = snapshot.seq;
    const fill = <T>(map: Map<string, T>, records: T[], key: (r: T) => string) => {
      map.clear();
      for (const record of records) map.set(key(record), record);
    };
    const r = snapshot.records;
    fill(this.sessions, r.session, (x) => x.id);
    fill(this.accounts, r.account, (x) => x.id);
    fill(
      this.links,
      r.link.map((l) => ({ ...l, expiresAt: new Date(l.expiresAt) })),
      (x) => x.token,
    );
    fill(this.authConfigs, r.auth_config, (x) => x.id);
    fill(this.triggers, r.trigger, (x) => x.id);
    for (const id of this.triggers.keys()) this.issuedTriggerIds.add(id);
    fill(this.subscriptions, r.subscription, (x) => x.id);
    fill(this.mcpSessions, r.mcp_session, (x) => x.id);
  }

  /**
   * Where consent links point. Unset: this simulator's own consent page. Set (e.g. to
   * `https://connect.composio.dev`), links look exactly like Composio's, for tests that check
   * what a client accepts; consent is then given through the controls.
   */
  consentLinkOrigin: string | undefined;

  consentUrl(token: string): string {
    if (this.consentLinkOrigin) return `${this.consentLinkOrigin}/link/${encodeURIComponent(token)}`;
    return `${this.origin}/_sim/connect/${encodeURIComponent(token)}`;
  }

  mcpUrl(sessionId: string): string {
    return `${this.origin}/tool_router/${encodeURIComponent(sessionId)}/mcp`;
  }
}
