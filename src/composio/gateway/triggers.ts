import { toTriggerInstance, toTriggerType } from '../mappers.js';
import type { Client, Sdk } from '../sdk.js';
import type { ComposioGateway } from '../types.js';
import type { CallCore } from './call.js';

/** Trigger types and the project's trigger instances. */
export function triggerCalls(
  core: CallCore,
  sdk: Sdk,
  client: Client,
): Pick<ComposioGateway, 'getTriggerType' | 'upsertTrigger' | 'listActiveTriggers' | 'setTriggerEnabled' | 'deleteTrigger'> {
  const { call } = core;
  return {
    // Through the client: core's `getType` drops `type` (webhook or poll).
    getTriggerType: (slug) =>
      call('triggerTypes.get', 1, { subject: `trigger type ${slug}`, idempotent: true }, async (signal) =>
        toTriggerType(await client.triggersTypes.retrieve(slug, { toolkit_versions: 'latest' }, { signal })),
      ),

    // Core checks the trigger type first (one more request), then upserts.
    upsertTrigger: (input) =>
      call('triggers.upsert', 2, { subject: `connected account ${input.connectedAccountId}`, idempotent: true }, async (signal) =>
        sdk.triggers.create(
          input.userId,
          input.slug,
          { connectedAccountId: input.connectedAccountId, triggerConfig: input.config },
          { signal },
        ),
      ),

    // Through the client: core's `listActive` cannot filter by user.
    listActiveTriggers: (query) =>
      call('triggers.list', 1, { subject: 'trigger', idempotent: true }, async (signal) => {
        const raw = await client.triggerInstances.listActive(
          {
            limit: query.limit,
            show_disabled: true,
            ...(query.cursor ? { cursor: query.cursor } : {}),
            ...(query.userIds?.length ? { user_ids: [...query.userIds] } : {}),
            ...(query.connectedAccountIds?.length ? { connected_account_ids: [...query.connectedAccountIds] } : {}),
            ...(query.triggerIds?.length ? { trigger_ids: [...query.triggerIds] } : {}),
          },
          { signal },
        );
        return { items: raw.items.map(toTriggerInstance), nextCursor: raw.next_cursor ?? null };
      }),

    setTriggerEnabled: (triggerId, enabled) =>
      call(enabled ? 'triggers.enable' : 'triggers.disable', 1, { subject: `trigger ${triggerId}`, idempotent: true }, async (signal) => {
        if (enabled) await sdk.triggers.enable(triggerId, { signal });
        else await sdk.triggers.disable(triggerId, { signal });
      }),

    deleteTrigger: (triggerId) =>
      call('triggers.delete', 1, { subject: `trigger ${triggerId}` }, async (signal) => {
        await sdk.triggers.delete(triggerId, { signal });
      }),
  };
}
