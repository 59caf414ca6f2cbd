import { ComposioConnectedAccountNotRevokableError, ComposioConnectedAccountRevocationNotSupportedError } from '@composio/core';
import { toConnectedAccount } from '../mappers.js';
import type { Client, Sdk } from '../sdk.js';
import type { ComposioGateway } from '../types.js';
import type { CallCore } from './call.js';

/** Connected accounts: listed and read through the client, revoked and deleted through core. */
export function accountCalls(
  core: CallCore,
  sdk: Sdk,
  client: Client,
): Pick<ComposioGateway, 'listConnectedAccounts' | 'getConnectedAccount' | 'deleteConnectedAccount'> {
  const { call } = core;
  return {
    // Read through the client: core drops `user_id`, which callers need to prove that an
    // account belongs to the installation asking.
    listConnectedAccounts: (query) =>
      call('accounts.list', 1, { subject: 'connected account', idempotent: true }, async (signal) => {
        const raw = await client.connectedAccounts.list(
          {
            user_ids: [query.userId],
            limit: query.limit,
            ...(query.cursor ? { cursor: query.cursor } : {}),
            ...(query.toolkitSlugs?.length ? { toolkit_slugs: [...query.toolkitSlugs] } : {}),
            ...(query.statuses?.length ? { statuses: [...query.statuses] } : {}),
          },
          { signal },
        );
        return { items: raw.items.map(toConnectedAccount), nextCursor: raw.next_cursor ?? null };
      }),

    getConnectedAccount: (id) =>
      call('accounts.get', 1, { subject: `connected account ${id}`, idempotent: true }, async (signal) =>
        toConnectedAccount(await client.connectedAccounts.retrieve(id, { signal })),
      ),

    deleteConnectedAccount: (id, { revoke }) =>
      call('accounts.delete', revoke ? 2 : 1, { subject: `connected account ${id}` }, async (signal) => {
        let revoked = false;
        if (revoke) {
          try {
            await sdk.connectedAccounts.revoke(id, { signal });
            revoked = true;
          } catch (error) {
            // Some apps cannot revoke programmatically, and an account that never finished
            // signing in has nothing to revoke; removing it is still what was asked.
            const harmless =
              error instanceof ComposioConnectedAccountRevocationNotSupportedError ||
              error instanceof ComposioConnectedAccountNotRevokableError;
            if (!harmless) throw error;
          }
        }
        await sdk.connectedAccounts.delete(id, { signal });
        return { revoked };
      }),
  };
}
