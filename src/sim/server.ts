import { parse as parseForm } from 'node:querystring';
import { setTimeout as delay } from 'node:timers/promises';
import Fastify, { type FastifyBaseLogger, type FastifyError, type FastifyReply, type FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { expireAbandonedSignIns } from './accounts.js';
import { catalogOf, DEFAULT_TOOLKIT_COUNT } from './catalog.js';
import type { SimContext, TriggerOwner } from './context.js';
import { createControls, type SimulatorControls } from './controls.js';
import { errorBody, SimCode, SimError } from './errors.js';
import { type FaultSpec, Faults, faultAnswer, type RecordedRequest, RequestLog } from './faults.js';
import { RpcError } from './mcp.js';
import type { OversizedPages } from './pagination.js';
import type { SimPersistence } from './persistence.js';
import { registerApiRoutes } from './routes/api.js';
import { isForm, registerControlRoutes, renderIndex } from './routes/controls.js';
import { registerMcpRoutes } from './routes/mcp.js';
import { type SimReadings, type SimSnapshot, SimStore } from './store.js';
import { STANDARD_REDELIVERY_DELAYS_MS } from './webhooks.js';

export interface SimulatorOptions {
  /** Loopback by default: the SDK refuses plain HTTP to anything else. */
  readonly host?: string;
  /** 0 (default) picks a free port. */
  readonly port?: number;
  /** The project key the simulator accepts in `x-api-key`. */
  readonly apiKey: string;
  readonly logger?: Logger | false;
  /** Hand out consent links on this origin (as Composio's `https://connect.composio.dev`). */
  readonly consentLinkOrigin?: string;
  /** Keep the world across restarts (sandbox mode); in memory only without. */
  readonly persistence?: SimPersistence;
  /** The world kept by an earlier run, taken up at start (its key must be `apiKey`). */
  readonly restore?: SimSnapshot;
  /** How many toolkits the catalog lists (default 1,000, as Composio's); the first six are the hand-written ones. */
  readonly toolkits?: number;
  /**
   * What a list `limit` above Composio's maximum gets: `refuse` (400, the default, the stricter
   * reading) or `clamp` (a full page). Composio documents neither.
   */
  readonly oversizedPages?: OversizedPages;
  /** Names each trigger's installation and automation on the index page (the broker knows them). */
  readonly describeTriggers?: (composioTriggerIds: string[]) => Promise<ReadonlyMap<string, TriggerOwner>>;
  /**
   * The waits before each redelivery of a webhook not answered 2xx; by default the Standard
   * Webhooks schedule (5 s … 10 h). Tests give short ones.
   */
  readonly redeliveryDelaysMs?: readonly number[];
  /** A kinder reading of Composio where it is undocumented or contested (a test's); strict by default. */
  readonly readings?: Partial<SimReadings>;
}

export interface Simulator {
  /** `http://127.0.0.1:<port>`: use as the SDK's `baseURL`. */
  readonly origin: string;
  readonly apiKey: string;
  readonly controls: SimulatorControls;
  close(): Promise<void>;
}

/** Paths that stand for Composio itself (key-checked, fault-injectable, recorded). */
const isComposioPath = (url: string) => url.startsWith('/api/') || url.startsWith('/tool_router/');
const isMcpPath = (url: string) => url.startsWith('/tool_router/');

/**
 * Starts a Composio simulator on its own port. Its world lives in this instance, and with
 * `persistence` is also kept after every change (before the answer to the request that made it).
 */
export async function startSimulator(options: SimulatorOptions): Promise<Simulator> {
  const closing = new AbortController();
  const store = new SimStore(options.apiKey);
  if (options.restore) store.restore(options.restore);
  store.redeliveryDelaysMs = options.redeliveryDelaysMs ?? STANDARD_REDELIVERY_DELAYS_MS;
  store.closing = closing.signal;
  Object.assign(store.readings, options.readings);
  const { persistence } = options;
  const ctx: SimContext = {
    store,
    faults: new Faults(),
    requests: new RequestLog(),
    toolkits: catalogOf(options.toolkits ?? DEFAULT_TOOLKIT_COUNT),
    oversizedPages: options.oversizedPages ?? 'refuse',
    mcpStreaming: null,
    closing: closing.signal,
    persist: persistence ? () => persistence.save(store.snapshot()) : () => Promise.resolve(),
    describeTriggers: options.describeTriggers ?? (async () => new Map()),
  };
  await ctx.persist();
  const controls = createControls(ctx);
  const app = Fastify({
    loggerInstance: (options.logger ? options.logger.child({ component: 'composio-simulator' }) : undefined) as
      | FastifyBaseLogger
      | undefined,
    forceCloseConnections: true,
    bodyLimit: 2 * 1024 * 1024,
  });

  // JSON bodies, where an empty body counts as none (the SDK omits bodies on some calls).
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => {
    const text = String(body);
    if (text.trim() === '') return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch {
      done(Object.assign(new Error('Request body is not valid JSON'), { statusCode: 400, invalidJson: true }), undefined);
    }
  });
  // The control pages' forms.
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_req, body, done) => {
    done(null, parseForm(String(body)));
  });

  const recorded = new WeakMap<FastifyRequest, RecordedRequest>();
  app.addHook('onRequest', async (request, reply) => {
    // Time passes for sign-ins between requests: every answer sees the abandoned ones as such.
    expireAbandonedSignIns(ctx.store);
    if (!isComposioPath(request.url)) return;
    const entry = ctx.requests.record(request.method, request.url);
    recorded.set(request, entry);
    reply.raw.once('close', () => {
      if (!reply.raw.writableFinished) entry.abandoned = true;
    });
    const fault = ctx.faults.take(request.method, request.url.split('?')[0] ?? request.url);
    if (fault) {
      const handled = await applyFault(fault, request, reply, ctx.closing);
      if (handled) return reply;
    }
    const key = request.headers['x-api-key'];
    if (request.headers['x-user-api-key'] !== undefined && key !== undefined) {
      return reply.code(401).send(errorBody(401, SimCode.unauthorized, 'Send exactly one credential header'));
    }
    if (typeof key !== 'string' || key === '') {
      return reply
        .code(401)
        .send(errorBody(401, SimCode.unauthorized, 'API key is missing', 'Pass your project API key in the x-api-key header'));
    }
    if (key !== ctx.store.apiKey) {
      return reply
        .code(401)
        .send(errorBody(401, SimCode.invalidApiKey, 'Invalid API key', 'Check the project API key in your Composio dashboard'));
    }
    return undefined;
  });
  // Whatever a request changed is kept before it is answered (the API, MCP, consent, controls).
  app.addHook('onSend', async (request) => {
    if (request.method !== 'GET' && request.method !== 'HEAD') await ctx.persist();
  });
  app.addHook('onResponse', async (request, reply) => {
    const entry = recorded.get(request);
    if (entry) entry.status = reply.statusCode;
  });

  app.setNotFoundHandler((request, reply) => {
    void reply.code(404).send(errorBody(404, SimCode.notFound, `Route ${request.method} ${request.url.split('?')[0]} not found`));
  });
  app.setErrorHandler((error: FastifyError | SimError, request, reply) => {
    if (error instanceof SimError && !(request.url.startsWith('/_sim') && isForm(request))) {
      void reply
        .code(error.status)
        .headers(error.headers)
        .send(errorBody(error.status, error.code, error.message, error.suggestedFix));
      return;
    }
    const statusCode = error instanceof SimError ? error.status : error.statusCode;
    const status = statusCode && statusCode >= 400 && statusCode < 500 ? statusCode : 500;
    // A form on the controls page: the page again, saying what went wrong.
    if (request.url.startsWith('/_sim') && isForm(request)) {
      if (status === 500) request.log.error({ err: error }, 'simulator error');
      const message = status === 500 ? 'Internal server error' : error.message;
      return renderIndex(ctx, controls, { error: message }).then((html) => reply.code(status).type('text/html; charset=utf-8').send(html));
    }
    if (isMcpPath(request.url) && (error as { invalidJson?: boolean }).invalidJson) {
      void reply.code(400).send({ jsonrpc: '2.0', id: null, error: { code: RpcError.parse, message: 'Parse error' } });
      return;
    }
    if (status === 500) request.log.error({ err: error }, 'simulator error');
    void reply
      .code(status)
      .send(
        errorBody(status, status === 500 ? SimCode.internal : SimCode.badRequest, status === 500 ? 'Internal server error' : error.message),
      );
  });

  registerApiRoutes(app, ctx);
  registerMcpRoutes(app, ctx);
  registerControlRoutes(app, ctx, controls);

  const host = options.host ?? '127.0.0.1';
  await app.listen({ host, port: options.port ?? 0 });
  const address = app.server.address();
  const port = typeof address === 'object' && address !== null ? address.port : (options.port ?? 0);
  // Listening on every address (a container publishing the port), it is reached on loopback.
  const reachAt = host === '0.0.0.0' ? '127.0.0.1' : host === '::' ? '::1' : host;
  const origin = `http://${reachAt.includes(':') ? `[${reachAt}]` : reachAt}:${port}`;
  ctx.store.origin = origin;
  ctx.store.consentLinkOrigin = options.consentLinkOrigin;

  return {
    origin,
    apiKey: options.apiKey,
    controls,
    close: async () => {
      closing.abort();
      await app.close();
      await ctx.persist();
    },
  };
}

/** Returns true when the fault produced the whole answer (status or reset). */
async function applyFault(fault: FaultSpec, request: FastifyRequest, reply: FastifyReply, closing: AbortSignal): Promise<boolean> {
  if (fault.delayMs) {
    try {
      await delay(fault.delayMs, undefined, { signal: closing });
    } catch {
      // Closing: drop the request rather than hold the server open.
      reply.hijack();
      request.raw.destroy();
      return true;
    }
  }
  if (fault.reset) {
    reply.hijack();
    request.raw.socket.destroy();
    return true;
  }
  if (fault.status === undefined) return false;
  const { headers, body } = faultAnswer({ ...fault, status: fault.status });
  void reply.code(fault.status).headers(headers).send(body);
  return true;
}
