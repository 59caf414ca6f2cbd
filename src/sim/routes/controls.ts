import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { findToolkit, findTriggerType } from '../catalog.js';
import type { SimContext } from '../context.js';
import type { SimulatorControls } from '../controls.js';
import { badRequest, SimError } from '../errors.js';
import { parseFaultSpec } from '../faults.js';
import { asObject, type Json, optionalString } from '../input.js';
import { consentPage, type IndexMessages, indexPage, messagePage } from '../pages.js';
import { getLink } from '../sessions.js';
import type { AccountStatus } from '../store.js';

/**
 * The developer's side of the simulator, under `/_sim`: the consent page a connect link points
 * at, an index page listing everything with buttons, and JSON controls mirroring
 * `SimulatorControls`. HTML forms post url-encoded and are redirected back to a page; JSON
 * callers get JSON. No API key: the simulator listens on loopback for one developer.
 */

type Req = FastifyRequest<{ Params: Record<string, string>; Querystring: Record<string, string | undefined>; Body: unknown }>;

export const isForm = (req: FastifyRequest) => String(req.headers['content-type'] ?? '').startsWith('application/x-www-form-urlencoded');

/** Form posts go back to the index with a one-line notice; JSON posts get the result. */
function answer(req: FastifyRequest, reply: FastifyReply, notice: string, result: unknown, status = 200) {
  if (isForm(req))
    return reply
      .code(303)
      .header('location', `/_sim?notice=${encodeURIComponent(notice)}`)
      .send();
  return reply.code(status).send(result);
}

/** The index page, with each trigger's installation and automation when the broker names them. */
export async function renderIndex(ctx: SimContext, controls: SimulatorControls, messages: IndexMessages): Promise<string> {
  const owners = await ctx.describeTriggers([...ctx.store.triggers.keys()]).catch(() => new Map());
  return indexPage(ctx, controls, messages, owners);
}

export function registerControlRoutes(app: FastifyInstance, ctx: SimContext, controls: SimulatorControls): void {
  app.get('/_sim', async (req: Req, reply) =>
    reply.type('text/html; charset=utf-8').send(await renderIndex(ctx, controls, { notice: req.query.notice })),
  );
  app.get('/_sim/state', async () => controls.state());
  app.get('/_sim/requests', async () => ({ requests: controls.requests() }));
  app.delete('/_sim/requests', async () => {
    controls.clearRequests();
    return { cleared: true };
  });

  app.post('/_sim/accounts', async (req: Req, reply) => {
    const body = asObject(req.body);
    const userId = optionalString(body, 'userId');
    const toolkit = optionalString(body, 'toolkit');
    if (!userId || !toolkit) throw badRequest('userId and toolkit are required');
    const alias = optionalString(body, 'alias');
    const status = optionalString(body, 'status') as AccountStatus | undefined;
    const account = controls.createAccount({ userId, toolkit, ...(alias ? { alias } : {}), ...(status ? { status } : {}) });
    return answer(req, reply, `Created ${account.id} (${account.status})`, account, 201);
  });
  app.post('/_sim/accounts/:id/expire', async (req: Req, reply) => {
    const result = await controls.expireAccount(req.params.id as string);
    const delivered = result.delivery
      ? `; webhook ${describeDelivery(result.delivery)}`
      : '; no subscription for composio.connected_account.expired';
    const stopped =
      result.triggersDisabled.length > 0 ? `; ${result.triggersDisabled.length} trigger(s) disabled (connection_expired)` : '';
    return answer(req, reply, `${result.account.id} is EXPIRED${delivered}${stopped}`, result);
  });
  app.post('/_sim/triggers/:id/fire', async (req: Req, reply) => {
    let data = eventData(asObject(req.body));
    // From the page, what was typed is laid over the trigger type's sample event; JSON callers
    // send exactly the data they mean.
    const trigger = ctx.store.triggers.get(req.params.id as string);
    if (isForm(req) && data && trigger) data = { ...(findTriggerType(trigger.slug)?.sample ?? {}), ...data };
    const delivery = await controls.fireTrigger(req.params.id as string, data);
    const said = delivery.excludedByQuery
      ? `not delivered: the trigger's Gmail query (${delivery.excludedByQuery}) excludes this mail`
      : describeDelivery(delivery);
    return answer(req, reply, `Fired ${req.params.id}: ${said}`, delivery);
  });

  app.post('/_sim/triggers/:id/disable', async (req: Req, reply) => {
    const reason = optionalString(asObject(req.body), 'reason');
    if (!reason) throw badRequest('reason is required');
    const result = await controls.disableTrigger(req.params.id as string, reason);
    const delivered = result.delivery
      ? `; webhook ${describeDelivery(result.delivery)}`
      : '; no subscription for composio.trigger.disabled';
    return answer(req, reply, `Composio stopped ${result.triggerId} (${reason})${delivered}`, result);
  });

  app.post('/_sim/faults', async (req: Req, reply) => {
    const spec = parseFaultSpec(req.body);
    controls.injectFault(spec);
    return answer(req, reply, 'Fault armed', { faults: controls.state().faults });
  });
  app.delete('/_sim/faults', async () => {
    controls.clearFaults();
    return { faults: [] };
  });
  app.post('/_sim/faults/clear', async (req: Req, reply) => {
    controls.clearFaults();
    return answer(req, reply, 'Faults cleared', { faults: [] });
  });

  app.post('/_sim/mcp/streaming', async (req: Req, reply) => {
    const body = asObject(req.body);
    const times = body.times === undefined || body.times === '' ? undefined : Number(body.times);
    const breakAfter = body.breakAfter === undefined || body.breakAfter === '' ? undefined : Number(body.breakAfter);
    controls.setMcpStreaming({
      chunks: Number(body.chunks),
      intervalMs: Number(body.intervalMs),
      ...(times !== undefined ? { times } : {}),
      ...(breakAfter !== undefined ? { breakAfter } : {}),
      ...(body.as === 'json' || body.as === 'sse' ? { as: body.as } : {}),
    });
    return answer(req, reply, 'MCP answers will stream slowly', { mcpStreaming: controls.state().mcpStreaming });
  });
  app.delete('/_sim/mcp/streaming', async () => {
    controls.setMcpStreaming(null);
    return { mcpStreaming: null };
  });
  app.post('/_sim/mcp/streaming/clear', async (req: Req, reply) => {
    controls.setMcpStreaming(null);
    return answer(req, reply, 'MCP answers stream normally', { mcpStreaming: null });
  });

  // The consent page a connect link's redirect_url points at.
  app.get('/_sim/connect/:token', async (req: Req, reply) => {
    const token = req.params.token as string;
    const link = ctx.store.links.get(token);
    if (!link)
      return reply.code(404).type('text/html; charset=utf-8').send(messagePage('Link not found', 'This connect link does not exist.'));
    const toolkitName = findToolkit(link.toolkit)?.name ?? link.toolkit;
    const account = ctx.store.accounts.get(link.accountId);
    const expired = link.outcome === 'pending' && ctx.store.now() > link.expiresAt;
    return reply.type('text/html; charset=utf-8').send(
      consentPage({
        token,
        toolkitName,
        alias: link.alias,
        userId: link.userId,
        outcome: link.outcome,
        expired,
        accountId: account?.id ?? link.accountId,
        status: account?.status ?? 'DELETED',
      }),
    );
  });
  for (const decision of ['authorize', 'deny'] as const) {
    app.post(`/_sim/connect/:token/${decision}`, async (req: Req, reply) => {
      const token = req.params.token as string;
      try {
        const account = decision === 'authorize' ? controls.authorizeLink(token) : controls.denyLink(token);
        if (!isForm(req)) return account;
        const link = getLink(ctx.store, token);
        if (link.callbackUrl) {
          // Where Composio sends the person afterwards; the query names are a guess.
          const target = new URL(link.callbackUrl);
          target.searchParams.set('status', decision === 'authorize' ? 'success' : 'failed');
          target.searchParams.set('connected_account_id', account.id);
          return reply.code(303).header('location', target.toString()).send();
        }
        return reply
          .code(303)
          .header('location', `/_sim/connect/${encodeURIComponent(token)}`)
          .send();
      } catch (error) {
        if (!isForm(req) || !(error instanceof SimError)) throw error;
        return reply.code(error.status).type('text/html; charset=utf-8').send(messagePage('Could not complete', error.message));
      }
    });
  }
}

function eventData(body: Json): Record<string, unknown> | undefined {
  const data = body.data;
  if (data === undefined || data === null || data === '') return undefined;
  if (typeof data === 'string') {
    // From the index page's textarea.
    try {
      return asObject(JSON.parse(data), 'data');
    } catch (error) {
      if (error instanceof SimError) throw error;
      throw badRequest('data must be a JSON object');
    }
  }
  return asObject(data, 'data');
}

function describeDelivery(d: { webhookId: string; url: string; status: number | null; error?: string }): string {
  return d.status === null
    ? `${d.webhookId} to ${d.url} failed: ${d.error ?? 'no answer'}`
    : `${d.webhookId} to ${d.url} answered ${d.status}`;
}
