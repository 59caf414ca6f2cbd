import type { Client } from '../sdk.js';
import type { ComposioGateway } from '../types.js';
import type { CallCore } from './call.js';

/** Composio's toolkit catalog, as Composio sends it. */
export function catalogCalls(core: CallCore, client: Client): Pick<ComposioGateway, 'getCatalog'> {
  return {
    // The catalog the existing client expects lives on v3, which the generated client has no
    // method for; its generic GET still sends the key and raises the same error classes.
    getCatalog: () =>
      core.call('catalog.get', 1, { subject: 'toolkit catalog', idempotent: true }, (signal) =>
        client.get<unknown>('/api/v3/toolkits', { query: { limit: 500, sort_by: 'usage' }, signal }),
      ),
  };
}
