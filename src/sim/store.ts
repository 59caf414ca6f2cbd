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
  private seq = 0;

  constructor(
    readonly apiKey: string,
    private readonly clock: () => Date = () => new Date(),
  ) {}

  now(): Date {
    return this.clock();
  }

  nowIso(): string {
    return this.clock().toISOString();
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
