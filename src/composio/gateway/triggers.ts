import { composioStatus } from '../errors.js';
import { toTriggerInstance, toTriggerType } from '../mappers.js';
import type { Client, Sdk } from '../sdk.js';
import type { ComposioGateway, TriggerType } from '../types.js';
import { type CallCore, MAX_PAGE, pageLimit } from './call.js';

/** Composio's answers to a change that had already happened (composio-api.md §10 rows 2 and 3). */
const ALREADY = 409;
const GONE = 410;
/** A runaway cursor must not cost more than this many calls: 1,000 types at 50 a page. */
const MAX_TYPE_PAGES = 20;

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

    // One page per call, 50 a page (Composio's most), to the last page: most toolkits have a
    // handful of trigger types (one call), a few have more than a page. A repeated cursor ends
    // the sweep.
    listTriggerTypes: async (toolkit) => {
      const types: TriggerType[] = [];
      const seen = new Set<string>();
      let cursor: string | undefined;
      for (let page = 0; page < MAX_TYPE_PAGES; page += 1) {
        const raw = await call('triggerTypes.list', 1, { subject: `trigger types of ${toolkit}`, idempotent: true, toolkit }, (signal) =>
          client.triggersTypes.list(
            { toolkit_slugs: [toolkit], limit: MAX_PAGE, toolkit_versions: 'latest', ...(cursor ? { cursor } : {}) },
            { signal },
          ),
        );
        types.push(...raw.items.map(toTriggerType));
        cursor = raw.next_cursor ?? undefined;
        if (!cursor || seen.has(cursor)) break;
        seen.add(cursor);
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
            limit: pageLimit(query.limit),
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

    // Composio answers 409 "already enabled/disabled" to a switch to the state the trigger is
    // in (composio-api.md §10 row 2): the state asked for is the state it has, so that is done.
    setTriggerEnabled: async (triggerId, enabled) => {
      await call(
        enabled ? 'triggers.enable' : 'triggers.disable',
        1,
        { subject: `trigger ${triggerId}`, idempotent: true },
        async (signal) => {
          try {
            if (enabled) await sdk.triggers.enable(triggerId, { signal });
            else await sdk.triggers.disable(triggerId, { signal });
            return 'ok';
          } catch (error) {
            if (composioStatus(error) === ALREADY) return enabled ? 'already_enabled' : 'already_disabled';
            throw error;
          }
        },
        (outcome) => outcome,
      );
    },

    // A trigger Composio already removed answers 409 "already deleted" or 410 "already gone"
    // (§10 row 3): what was asked for has happened. (404, a trigger Composio never had, is left
    // to the callers, which also count it as gone.)
    deleteTrigger: async (triggerId) => {
      await call(
        'triggers.delete',
        1,
        { subject: `trigger ${triggerId}` },
        async (signal) => {
          try {
            await sdk.triggers.delete(triggerId, { signal });
            return 'ok';
          } catch (error) {
            const status = composioStatus(error);
            if (status === ALREADY || status === GONE) return 'already_deleted';
            throw error;
          }
        },
        (outcome) => outcome,
      );
    },
  };
}
