import type { ToolkitDef } from './catalog.js';
import type { Faults, RequestLog } from './faults.js';
import type { OversizedPages } from './pagination.js';
import type { SimStore } from './store.js';

/** Who a trigger belongs to on the broker's side (sandbox mode): unknown to Composio itself. */
export interface TriggerOwner {
  readonly installationId: string;
  readonly automationId: string;
}

/** How the next answers of the MCP endpoint are paced (to test streaming proxies). */
interface McpStreaming {
  /** Number of separate SSE events (progress notices, then the result), each written on its own. */
  readonly chunks: number;
  readonly intervalMs: number;
  /** How many responses stream this way; null: until cleared. */
  remaining: number | null;
  /** Drop the connection after this many pieces, as a network fault mid-answer does; null: never. */
  readonly breakAfter: number | null;
  /** The answer's form: SSE events, or one JSON body sent in pieces. */
  readonly as: 'json' | 'sse';
}

/** Everything a simulator's routes share; one per simulator instance. */
export interface SimContext {
  readonly store: SimStore;
  readonly faults: Faults;
  readonly requests: RequestLog;
  /** The toolkit catalog this simulator lists (and every Session holds), in catalog order. */
  readonly toolkits: readonly ToolkitDef[];
  /** What a list `limit` above Composio's maximum gets: refused (the default) or clamped. */
  readonly oversizedPages: OversizedPages;
  mcpStreaming: McpStreaming | null;
  /** Aborted when the simulator closes, so injected delays do not hold the port open. */
  readonly closing: AbortSignal;
  /** Who each trigger belongs to on the broker's side, for the index page (sandbox mode). */
  describeTriggers(composioTriggerIds: string[]): Promise<ReadonlyMap<string, TriggerOwner>>;
  /** Keeps the world as it is now (sandbox mode: in Postgres; otherwise nothing to do). */
  persist(): Promise<void>;
}
