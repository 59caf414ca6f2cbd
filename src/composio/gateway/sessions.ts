import { toConnectLink, toSession, toSessionToolkit } from '../mappers.js';
import type { Client } from '../sdk.js';
import type { ComposioGateway } from '../types.js';
import { type CallCore, pageLimit } from './call.js';

/** Tool Router Sessions, their toolkits and sign-in links. */
export function sessionCalls(
  core: CallCore,
  client: Client,
): Pick<ComposioGateway, 'createSession' | 'getSession' | 'listSessionToolkits' | 'createLink'> {
  const { call } = core;
  return {
    createSession: (userId) =>
      // Through the client: core's create cannot send `enable_connection_removal`.
      call('session.create', 1, { subject: 'Session' }, async (signal) =>
        toSession(
          await client.toolRouter.session.create(
            {
              user_id: userId,
              manage_connections: {
                enable: true,
                enable_wait_for_connections: true,
                enable_connection_removal: true,
              },
              multi_account: { enable: true, max_accounts_per_toolkit: 5, require_explicit_selection: true },
            },
            { signal },
          ),
        ),
      ),

    // Through the client too, so create and get share one mapping; core's `use` would build a
    // Session object (with its own MCP-header logic) that the broker does not use.
    getSession: (sessionId) =>
      call('session.get', 1, { subject: `Session ${sessionId}`, idempotent: true }, async (signal) =>
        toSession(await client.toolRouter.session.retrieve(sessionId, { signal })),
      ),

    // Session toolkits and links go through the client: core only offers them on a Session
    // object, and building one costs a GET of the Session on every request.
    listSessionToolkits: (sessionId, page) =>
      call('session.toolkits', 1, { subject: `Session ${sessionId}`, idempotent: true }, async (signal) => {
        const raw = await client.toolRouter.session.toolkits(
          sessionId,
          {
            limit: pageLimit(page.limit),
            ...(page.cursor ? { cursor: page.cursor } : {}),
            ...(page.toolkits?.length ? { toolkits: [...page.toolkits] } : {}),
            ...(page.isConnected === undefined ? {} : { is_connected: page.isConnected }),
          },
          { signal },
        );
        return { items: raw.items.map(toSessionToolkit), nextCursor: raw.next_cursor ?? null };
      }),

    createLink: (sessionId, toolkit, link) =>
      call('session.link', 1, { subject: `Session ${sessionId}`, toolkit }, async (signal) =>
        toConnectLink(
          await client.toolRouter.session.link(
            sessionId,
            {
              toolkit,
              ...(link.alias === undefined ? {} : { alias: link.alias }),
              ...(link.callbackUrl ? { callback_url: link.callbackUrl } : {}),
            },
            { signal },
          ),
        ),
      ),
  };
}
