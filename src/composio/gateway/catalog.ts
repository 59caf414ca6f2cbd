import type { Client } from '../sdk.js';
import type { ComposioGateway } from '../types.js';
import type { CallCore } from './call.js';

/** The most toolkits Composio gives on one catalog page ("max allowed is 1000"). */
const CATALOG_PAGE_SIZE = 1000;
/** A runaway cursor must not cost more than this many calls (20,000 toolkits). */
const MAX_CATALOG_PAGES = 20;

interface CatalogPage {
  items?: unknown[];
  next_cursor?: string | null;
  [field: string]: unknown;
}

/** Composio's toolkit catalog, as Composio sends it. */
export function catalogCalls(core: CallCore, client: Client): Pick<ComposioGateway, 'getCatalog'> {
  return {
    // The catalog the existing client expects lives on v3, which the generated client has no
    // method for; its generic GET still sends the key and raises the same error classes. Every
    // page is read (Composio lists 1,000+ toolkits) and answered as one page of them all, in
    // Composio's own envelope and order, so the client sees every app.
    getCatalog: async () => {
      const items: unknown[] = [];
      const seen = new Set<string>();
      let first: CatalogPage | undefined;
      let cursor: string | undefined;
      for (let page = 0; page < MAX_CATALOG_PAGES; page += 1) {
        const query = { limit: CATALOG_PAGE_SIZE, sort_by: 'usage', ...(cursor ? { cursor } : {}) };
        const raw = await core.call('catalog.get', 1, { subject: 'toolkit catalog', idempotent: true }, (signal) =>
          client.get<CatalogPage>('/api/v3/toolkits', { query, signal }),
        );
        first ??= raw;
        items.push(...(Array.isArray(raw.items) ? raw.items : []));
        cursor = typeof raw.next_cursor === 'string' && raw.next_cursor !== '' ? raw.next_cursor : undefined;
        if (!cursor || seen.has(cursor)) break;
        seen.add(cursor);
      }
      return { ...first, items, next_cursor: null, total_pages: 1, current_page: 1, total_items: items.length };
    },
  };
}
