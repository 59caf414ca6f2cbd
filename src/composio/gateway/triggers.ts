import { toTriggerInstance, toTriggerType } from '../mappers.js';
import type { Client, Sdk } from '../sdk.js';
import type { ComposioGateway, TriggerType } from '../types.js';
import type { CallCore } from './call.js';

const TYPE_PAGE_SIZE = 100;
const MAX_TYPE_PAGES = 10;

/** Trigger types and the project's trigger instances. */
export function triggerCalls(
  core: CallCore,
  sdk: Sdk,
  client: Client,
): Pick<
  ComposioGateway,
  'getTriggerType' | 'listTriggerTypes' | 'upsertTrigger' | 'listActiveTriggers' | 'setTriggerEnabled' | 'deleteTrigger'
> {
  const { call } = core;
  return {
    // Through the client: core's `getType` drops `type` (webhook or poll).
    getTriggerType: (slug) =>
      call('triggerTypes.get', 1, { subject: `trigger type ${slug}`, idempotent: true }, async (signal) =>
        toTriggerType(await client.triggersTypes.retrieve(slug, { toolkit_versions: 'latest' }, { signal })),
      ),

    // One page per call; a toolkit has a handful of trigger types, so this is one request.
    listTriggerTypes: async (toolkit) => {
      const types: TriggerType[] = [];
      let cursor: string | undefined;
      for (let page = 0; page < MAX_TYPE_PAGES; page += 1) {
        const raw = await call('triggerTypes.list', 1, { subject: `trigger types of ${toolkit}`, idempotent: true, toolkit }, (signal) =>
          client.triggersTypes.list(
            { toolkit_slugs: [toolkit], limit: TYPE_PAGE_SIZE, toolkit_versions: 'latest', ...(cursor ? { cursor } : {}) },
            { signal },
          ),
        );
        types.push(...raw.items.map(toTriggerType));
        cursor = raw.next_cursor ?? undefined;
        if (!cursor) break;
      }
      return types;
    },

    // Through the client: core's `create` asks for the trigger type first (a second request the
    // broker has already answered from its cache); Composio itself refuses an unknown type.
    upsertTrigger: (input) =>
      call('triggers.upsert', 1, { subject: `connected account ${input.connectedAccountId}`, idempotent: true }, async (signal) => {
        const raw = await client.triggerInstances.upsert(
          input.slug,
          {
            connected_account_id: input.connectedAccountId,
            trigger_config: input.config,
            toolkit_versions: 'latest',
            user_id: input.userId,
          },
          { signal },
        );
        return { triggerId: raw.trigger_id };
      }),

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
