import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { ComposioGateway } from '../composio/index.js';

/** Ten minutes, as the client caches it too. */
const FRESH_MS = 10 * 60 * 1000;

/**
 * Composio's toolkit catalog, shared by every installation of this process: fetched at most
 * once per ten minutes (concurrent requests share one fetch), and the last copy is served
 * while Composio is briefly down.
 */
export class CatalogCache {
  private copy: { body: unknown; fetchedAt: number } | undefined;
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

  private async refresh(): Promise<unknown> {
    const body = await this.composio.getCatalog();
    this.copy = { body, fetchedAt: this.clock.now().getTime() };
    return body;
  }

  private view(now: number) {
    const copy = this.copy!;
    return { body: copy.body, ageSeconds: Math.max(0, Math.floor((now - copy.fetchedAt) / 1000)) };
  }
}
