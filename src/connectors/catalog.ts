import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { ComposioGateway } from '../composio/index.js';

/** Ten minutes, as the client caches it too. */
const FRESH_MS = 10 * 60 * 1000;

/**
 * Composio's toolkit catalog, every page of it, shared by every installation of this process:
 * fetched at most once per ten minutes (concurrent requests share one fetch), and the last copy
 * is served while Composio is briefly down.
 */
export class CatalogCache {
  private copy: { body: unknown; fetchedAt: number; noAuth: ReadonlySet<string> } | undefined;
  private inFlight: Promise<unknown> | undefined;

  constructor(
    private readonly composio: ComposioGateway,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  async get(): Promise<{ body: unknown; ageSeconds: number }> {
    const now = this.clock.now().getTime();
    if (this.copy && now - this.copy.fetchedAt < FRESH_MS) return this.view(now);
    try {
      this.inFlight ??= this.refresh().finally(() => {
        this.inFlight = undefined;
      });
      await this.inFlight;
    } catch (error) {
      if (!this.copy) throw error;
      this.logger.warn({ err: error, ageSeconds: Math.round((now - this.copy.fetchedAt) / 1000) }, 'serving a stale catalog');
    }
    return this.view(now);
  }

  /**
   * The toolkits that need no sign-in (`no_auth`), from the same copy: an inventory shows them
   * as connected without sweeping a Session's thousand toolkits for them.
   */
  async noAuthToolkits(): Promise<ReadonlySet<string>> {
    await this.get();
    return this.copy!.noAuth;
  }

  private async refresh(): Promise<unknown> {
    const body = await this.composio.getCatalog();
    this.copy = { body, fetchedAt: this.clock.now().getTime(), noAuth: noAuthSlugs(body) };
    return body;
  }

  private view(now: number) {
    const copy = this.copy!;
    return { body: copy.body, ageSeconds: Math.max(0, Math.floor((now - copy.fetchedAt) / 1000)) };
  }
}

/** The slugs of the catalog's toolkits marked `no_auth`; a body of another shape has none. */
function noAuthSlugs(body: unknown): ReadonlySet<string> {
  const items: unknown = typeof body === 'object' && body !== null ? (body as { items?: unknown }).items : undefined;
  const slugs = new Set<string>();
  if (!Array.isArray(items)) return slugs;
  for (const item of items) {
    if (typeof item !== 'object' || item === null) continue;
    const { slug, no_auth: noAuth } = item as { slug?: unknown; no_auth?: unknown };
    if (noAuth === true && typeof slug === 'string') slugs.add(slug);
  }
  return slugs;
}
