import { badRequest } from './errors.js';

/**
 * Composio's list envelope: `{items, next_cursor, total_pages, current_page, total_items}`,
 * `next_cursor` null on the last page. Composio describes its cursor as "base64 of page and
 * limit"; the simulator does the same, so a cursor also fixes the page size it was made for.
 */
export interface PageEnvelope<T> {
  items: T[];
  next_cursor: string | null;
  total_pages: number;
  current_page: number;
  total_items: number;
}

/**
 * The most items a page of each list holds, as Composio's v3.1 types state them ("Number of
 * items per page, max allowed is 50"): 50 on every list, except the toolkit catalog (1,000).
 * Connected accounts state no maximum; 50 is the safe reading, so the simulator takes it.
 */
export const MAX_PAGE = { list: 50, toolkits: 1000 } as const;

/**
 * What a `limit` above the maximum gets. Composio does not document it: `refuse` (400, the
 * stricter reading, the default) or `clamp` (the page holds the maximum).
 */
export type OversizedPages = 'refuse' | 'clamp';

export function paginate<T>(
  all: readonly T[],
  query: { cursor?: string | undefined; limit?: number | undefined },
  limits: { defaultLimit: number; maxLimit: number; oversized?: OversizedPages },
): PageEnvelope<T> {
  let page = 1;
  let limit = query.limit ?? limits.defaultLimit;
  if (query.cursor) ({ page, limit } = decodeCursor(query.cursor));
  if (Number.isInteger(limit) && limit > limits.maxLimit && limits.oversized === 'clamp') limit = limits.maxLimit;
  if (!Number.isInteger(limit) || limit < 1 || limit > limits.maxLimit) {
    throw badRequest(`limit must be an integer between 1 and ${limits.maxLimit}`);
  }
  const start = (page - 1) * limit;
  const totalPages = Math.max(1, Math.ceil(all.length / limit));
  return {
    items: all.slice(start, start + limit),
    next_cursor: start + limit < all.length ? encodeCursor(page + 1, limit) : null,
    total_pages: totalPages,
    current_page: page,
    total_items: all.length,
  };
}

function encodeCursor(page: number, limit: number): string {
  return Buffer.from(JSON.stringify({ page, limit })).toString('base64');
}

function decodeCursor(cursor: string): { page: number; limit: number } {
  try {
    const parsed: unknown = JSON.parse(Buffer.from(cursor, 'base64').toString('utf8'));
    if (typeof parsed === 'object' && parsed !== null) {
      const { page, limit } = parsed as { page?: unknown; limit?: unknown };
      if (Number.isInteger(page) && (page as number) >= 1 && Number.isInteger(limit)) {
        return { page: page as number, limit: limit as number };
      }
    }
  } catch {
    // fall through to the error below
  }
  throw badRequest('Invalid cursor');
}
