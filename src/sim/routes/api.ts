import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { deleteAccount, getAccount, listAccounts, revokeAccount } from '../accounts.js';
import { findToolkit, TRIGGER_TYPES } from '../catalog.js';
import type { SimContext } from '../context.js';
import { boolParam, intParam, listParam, stringParam } from '../input.js';
import { MAX_PAGE, paginate } from '../pagination.js';
import { createLink, createSession, deleteSession, getSession, linkWire, selectedAccounts, sessionToolkitSlugs } from '../sessions.js';
import { deleteTrigger, listActiveTriggers, requireTriggerType, setTriggerStatus, upsertTrigger } from '../triggers.js';
import { createSubscription, EVENT_TYPES, getSubscription, rotateSecret, updateSubscription } from '../webhooks.js';
import {
  accountWire,
  authConfigWire,
  catalogToolkitWire,
  sessionToolkitWire,
  sessionWire,
  subscriptionWire,
  triggerInstanceWire,
  triggerTypeWire,
} from '../wire.js';

/**
 * Composio's REST routes, as `@composio/client` 2.0.0-rc.6 calls them (all under `/api/v3.1`,
 * plus the v3 toolkit catalog). Status codes and shapes per `composio-api.md`.
 */

type Req = FastifyRequest<{ Params: Record<string, string>; Querystring: Record<string, string | undefined>; Body: unknown }>;

const V31 = '/api/v3.1';

export function registerApiRoutes(app: FastifyInstance, ctx: SimContext): void {
  const { store } = ctx;
  const created = (reply: FastifyReply, body: unknown) => reply.code(201).send(body);
  const oversized = ctx.oversizedPages;
  const pageQuery = (req: Req) => ({ cursor: stringParam(req.query.cursor), limit: intParam(req.query.limit, 'limit') });

  // Tool Router Sessions
  app.post(`${V31}/tool_router/session`, async (req: Req, reply) =>
    created(reply, sessionWire(store, createSession(store, req.body), { created: true })),
  );
  app.get(`${V31}/tool_router/session/:id`, async (req: Req) =>
    sessionWire(store, getSession(store, req.params.id as string), { created: false }),
  );
  app.delete(`${V31}/tool_router/session/:id`, async (req: Req) => {
    deleteSession(store, req.params.id as string);
    return { session_id: req.params.id, deleted: true };
  });
  // Every toolkit of the catalog, filtered by `toolkits`, `search` (name, slug or description)
  // and `is_connected` (an ACTIVE account selected; a no-auth toolkit has none, the stricter
  // reading), before the page is cut, as the v3.1 types describe the filters.
  app.get(`${V31}/tool_router/session/:id/toolkits`, async (req: Req) => {
    const session = getSession(store, req.params.id as string);
    const search = stringParam(req.query.search)?.toLowerCase();
    const connectedOnly = boolParam(req.query.is_connected);
    const selected = selectedAccounts(store, session);
    const items = sessionToolkitSlugs(session, listParam(req.query.toolkits), ctx.toolkits)
      .map((slug) => findToolkit(slug))
      .filter((t) => t !== undefined)
      .filter(
        (t) => !search || t.slug.includes(search) || t.name.toLowerCase().includes(search) || t.description.toLowerCase().includes(search),
      )
      .map((toolkit) => ({ toolkit, account: toolkit.noAuth ? undefined : selected(toolkit.slug) }))
      .filter(({ account }) => connectedOnly === undefined || (account?.status === 'ACTIVE') === connectedOnly);
    const page = paginate(items, pageQuery(req), { defaultLimit: 20, maxLimit: MAX_PAGE.list, oversized });
    return {
      ...page,
      items: page.items.map(({ toolkit, account }) =>
        sessionToolkitWire(toolkit, account, account ? store.authConfigs.get(account.authConfigId) : undefined),
      ),
    };
  });
  app.post(`${V31}/tool_router/session/:id/link`, async (req: Req, reply) => {
    const session = getSession(store, req.params.id as string);
    return created(reply, linkWire(store, createLink(store, session, req.body)));
  });

  // Connected accounts
  app.get(`${V31}/connected_accounts`, async (req: Req) => {
    const accounts = listAccounts(store, {
      userIds: listParam(req.query.user_ids),
      toolkitSlugs: listParam(req.query.toolkit_slugs),
      statuses: listParam(req.query.statuses),
      authConfigIds: listParam(req.query.auth_config_ids),
      accountIds: listParam(req.query.connected_account_ids),
      ascending: req.query.order_direction === 'asc',
    });
    const page = paginate(accounts, pageQuery(req), { defaultLimit: 20, maxLimit: MAX_PAGE.list, oversized });
    return { ...page, items: page.items.map((a) => accountWire(store, a)) };
  });
  app.get(`${V31}/connected_accounts/:id`, async (req: Req) => accountWire(store, getAccount(store, req.params.id as string)));
  app.delete(`${V31}/connected_accounts/:id`, async (req: Req) => {
    const id = req.params.id as string;
    const account = getAccount(store, id);
    // `revoke_on_delete` is best effort: an app that cannot revoke is still deleted.
    const revocable = account.status === 'ACTIVE' && findToolkit(account.toolkit)?.revocable === true;
    if (boolParam(req.query.revoke_on_delete) && revocable) revokeAccount(store, id);
    deleteAccount(store, id);
    return { success: true };
  });
  app.post(`${V31}/connected_accounts/:id/revoke`, async (req: Req) => revokeAccount(store, req.params.id as string));

  // Auth configs
  app.get(`${V31}/auth_configs`, async (req: Req) => {
    const toolkit = stringParam(req.query.toolkit_slug)?.toLowerCase();
    const managed = boolParam(req.query.is_composio_managed);
    const configs = [...store.authConfigs.values()].filter(
      (c) => (!toolkit || c.toolkit === toolkit) && (managed === undefined || c.isComposioManaged === managed),
    );
    const page = paginate(configs, pageQuery(req), { defaultLimit: 20, maxLimit: MAX_PAGE.list, oversized });
    return { ...page, items: page.items.map((c) => authConfigWire(store, c)) };
  });

  // Trigger types and instances
  app.get(`${V31}/triggers_types`, async (req: Req) => {
    const toolkits = listParam(req.query.toolkit_slugs)?.map((s) => s.toLowerCase());
    const types = TRIGGER_TYPES.filter((t) => !toolkits || toolkits.includes(t.toolkit));
    const page = paginate(types, pageQuery(req), { defaultLimit: 20, maxLimit: MAX_PAGE.list, oversized });
    return { ...page, items: page.items.map(triggerTypeWire) };
  });
  app.get(`${V31}/triggers_types/list/enum`, async () => TRIGGER_TYPES.map((t) => t.slug));
  app.get(`${V31}/triggers_types/:slug`, async (req: Req) => triggerTypeWire(requireTriggerType(req.params.slug as string)));
  app.get(`${V31}/trigger_instances/active`, async (req: Req) => {
    const triggers = listActiveTriggers(store, {
      userIds: listParam(req.query.user_ids),
      accountIds: listParam(req.query.connected_account_ids),
      triggerIds: listParam(req.query.trigger_ids),
      triggerNames: listParam(req.query.trigger_names),
      authConfigIds: listParam(req.query.auth_config_ids),
      showDisabled: boolParam(req.query.show_disabled),
    });
    const page = paginate(triggers, pageQuery(req), { defaultLimit: 20, maxLimit: MAX_PAGE.list, oversized });
    return { ...page, items: page.items.map((t) => triggerInstanceWire(store, t)) };
  });
  app.post(`${V31}/trigger_instances/:slug/upsert`, async (req: Req, reply) => {
    const { trigger, created: isNew } = upsertTrigger(store, req.params.slug as string, req.body);
    return reply.code(isNew ? 201 : 200).send({ trigger_id: trigger.id, deprecated: { uuid: trigger.uuid } });
  });
  app.patch(`${V31}/trigger_instances/manage/:id`, async (req: Req) => {
    setTriggerStatus(store, req.params.id as string, req.body);
    return { status: 'success' };
  });
  app.delete(`${V31}/trigger_instances/manage/:id`, async (req: Req) => {
    deleteTrigger(store, req.params.id as string);
    return { trigger_id: req.params.id };
  });

  // The project's webhook subscription
  app.get(`${V31}/webhook_subscriptions`, async (req: Req) => {
    const page = paginate([...store.subscriptions.values()], pageQuery(req), { defaultLimit: 20, maxLimit: MAX_PAGE.list, oversized });
    return { ...page, items: page.items.map((s) => subscriptionWire(s)) };
  });
  app.get(`${V31}/webhook_subscriptions/event_types`, async () => ({ items: EVENT_TYPES }));
  app.post(`${V31}/webhook_subscriptions`, async (req: Req, reply) =>
    created(reply, subscriptionWire(createSubscription(store, req.body), { fullSecret: true })),
  );
  app.get(`${V31}/webhook_subscriptions/:id`, async (req: Req) => subscriptionWire(getSubscription(store, req.params.id as string)));
  app.patch(`${V31}/webhook_subscriptions/:id`, async (req: Req) =>
    subscriptionWire(updateSubscription(store, req.params.id as string, req.body)),
  );
  app.delete(`${V31}/webhook_subscriptions/:id`, async (req: Req) => {
    getSubscription(store, req.params.id as string);
    store.subscriptions.delete(req.params.id as string);
    return { success: true };
  });
  app.post(`${V31}/webhook_subscriptions/:id/rotate_secret`, async (req: Req) => {
    const subscription = rotateSecret(store, req.params.id as string);
    return { id: subscription.id, secret: subscription.secret };
  });

  // The toolkit catalog: v3 is what the existing client proxies; v3.1 answers the same. Its
  // pages hold up to 1,000 toolkits; `sort_by=usage` is catalog order.
  const catalog = async (req: Req) => {
    const sorted = req.query.sort_by === 'alphabetically' ? [...ctx.toolkits].sort((a, b) => a.name.localeCompare(b.name)) : ctx.toolkits;
    const page = paginate(sorted, pageQuery(req), { defaultLimit: 20, maxLimit: MAX_PAGE.toolkits, oversized });
    return { ...page, items: page.items.map(catalogToolkitWire) };
  };
  app.get('/api/v3/toolkits', catalog);
  app.get(`${V31}/toolkits`, catalog);
}
