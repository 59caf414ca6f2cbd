import { ComposioConnectedAccountNotRevokableError, ComposioConnectedAccountRevocationNotSupportedError } from '@composio/core';
import { toConnectedAccount } from '../mappers.js';
import type { Client, Sdk } from '../sdk.js';
import type { ComposioGateway, ConnectedAccountQuery } from '../types.js';
import { type CallCore, pageLimit } from './call.js';

/**
 * Connected accounts: listed through the client, revoked and deleted through core. Composio's
 * answers no longer say whose an account is (`user_id` is deprecated), so an account is only
 * ever read from a list filtered by its user: the filter is the proof of ownership.
 */
export function accountCalls(
  core: CallCore,
  sdk: Sdk,
  client: Client,
): Pick<ComposioGateway, 'listConnectedAccounts' | 'findConnectedAccount' | 'deleteConnectedAccount'> {
  const { call } = core;
  const list = (query: ConnectedAccountQuery, signal: AbortSignal) =>
    client.connectedAccounts.list(
      {
        user_ids: [query.userId],
        limit: pageLimit(query.limit),
        ...(query.cursor ? { cursor: query.cursor } : {}),
        ...(query.toolkitSlugs?.length ? { toolkit_slugs: [...query.toolkitSlugs] } : {}),
        ...(query.statuses?.length ? { statuses: [...query.statuses] } : {}),
        ...(query.connectedAccountIds?.length ? { connected_account_ids: [...query.connectedAccountIds] } : {}),
      },
      { signal },
    );
  return {
    listConnectedAccounts: (query) =>
      call('accounts.list', 1, { subject: 'connected account', idempotent: true }, async (signal) => {
        const raw = await list(query, signal);
        return { items: raw.items.map((item) => toConnectedAccount(item, query.userId)), nextCursor: raw.next_cursor ?? null };
      }),

    // A read of one account (named so in metrics, as before), made as a filtered list.
    findConnectedAccount: (userId, id) =>
      call('accounts.get', 1, { subject: `connected account ${id}`, idempotent: true }, async (signal) => {
        const raw = await list({ userId, connectedAccountIds: [id], limit: 1 }, signal);
        // The id is checked too: a filter Composio did not apply must not yield another account.
        const found = raw.items.find((item) => item.id === id);
        return found ? toConnectedAccount(found, userId) : null;
      }),

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
