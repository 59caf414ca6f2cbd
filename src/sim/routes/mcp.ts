import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { setTimeout as delay } from 'node:timers/promises';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { SimContext } from '../context.js';
import type { FaultSpec } from '../faults.js';
import { handleRpc, type JsonRpcRequest, type JsonRpcResponse, RpcError, SUPPORTED_PROTOCOL_VERSIONS } from '../mcp.js';
import { getSession } from '../sessions.js';

/**
 * The Tool Router's MCP endpoint, `{origin}/tool_router/<session>/mcp`, over Streamable HTTP
 * (2025-06-18) as strictly as a strict server reads it: a POST must accept both
 * `application/json` and `text/event-stream` (406 otherwise), an `MCP-Protocol-Version` the
 * server does not speak is 400, GET is 405. Answers are an SSE stream unless a streaming control
 * or a slow-answer fault asks for JSON; an `mcp-session-id` is issued by every `initialize`
 * and required afterwards (an `initialize` carrying one is refused unless the reading
 * `mcpInitializeWithSessionId` is `new`); DELETE ends it.
 */

type Req = FastifyRequest<{ Params: { sessionId: string }; Body: unknown }>;

const rpcError = (id: string | number | null, code: number, message: string): JsonRpcResponse => ({
  jsonrpc: '2.0',
  id,
  error: { code, message },
});

export function registerMcpRoutes(app: FastifyInstance, ctx: SimContext): void {
  const { store } = ctx;
  const path = '/tool_router/:sessionId/mcp';

  app.post(path, async (req: Req, reply) => {
    const session = getSession(store, req.params.sessionId);
    const accept = String(req.headers.accept ?? '');
    if (!accept.includes('application/json') || !accept.includes('text/event-stream')) {
      return reply
        .code(406)
        .send(rpcError(null, RpcError.invalidRequest, 'Not Acceptable: Client must accept both application/json and text/event-stream'));
    }
    const version = header(req, 'mcp-protocol-version');
    if (version !== undefined && !SUPPORTED_PROTOCOL_VERSIONS.includes(version)) {
      return reply
        .code(400)
        .send(
          rpcError(
            null,
            RpcError.invalidRequest,
            `Bad Request: Unsupported protocol version ${version} (supported: ${SUPPORTED_PROTOCOL_VERSIONS.join(', ')})`,
          ),
        );
    }
    const message = req.body as Partial<JsonRpcRequest> | undefined;
    if (
      typeof message !== 'object' ||
      message === null ||
      Array.isArray(message) ||
      message.jsonrpc !== '2.0' ||
      typeof message.method !== 'string'
    ) {
      return reply.code(400).send(rpcError(null, RpcError.invalidRequest, 'Expected one JSON-RPC 2.0 message'));
    }
    let mcpSessionId = header(req, 'mcp-session-id');
    if (message.method === 'initialize' && mcpSessionId !== undefined && store.readings.mcpInitializeWithSessionId === 'refuse') {
      return reply.code(400).send(rpcError(message.id ?? null, RpcError.invalidRequest, 'Invalid Request: Server already initialized'));
    }
    if (message.method === 'initialize') {
      mcpSessionId = randomUUID();
      store.mcpSessions.set(mcpSessionId, { id: mcpSessionId, toolRouterSessionId: session.id });
    } else if (!mcpSessionId) {
      return reply
        .code(400)
        .send(rpcError(message.id ?? null, RpcError.invalidRequest, 'Missing mcp-session-id header; call initialize first'));
    } else if (store.mcpSessions.get(mcpSessionId)?.toolRouterSessionId !== session.id) {
      return reply.code(404).send(rpcError(message.id ?? null, RpcError.invalidRequest, 'MCP session not found; initialize a new one'));
    }
    reply.header('mcp-session-id', mcpSessionId);
    const response = handleRpc(store, session, message as JsonRpcRequest);
    if (!response) return reply.code(202).send();
    const slow = ctx.faults.takeSlowAnswer(req.url.split('?')[0] ?? req.url);
    if (slow) return sendSlowly(ctx, req, reply, response, slow);
    const streaming = takeStreaming(ctx);
    return streaming?.as === 'json' ? sendJson(ctx, reply, response, streaming) : sendSse(ctx, reply, response, streaming);
  });

  app.delete(path, async (req: Req, reply) => {
    getSession(store, req.params.sessionId);
    const mcpSessionId = header(req, 'mcp-session-id');
    if (!mcpSessionId) return reply.code(400).send(rpcError(null, RpcError.invalidRequest, 'Missing mcp-session-id header'));
    if (!store.mcpSessions.delete(mcpSessionId))
      return reply.code(404).send(rpcError(null, RpcError.invalidRequest, 'MCP session not found'));
    return reply.code(200).send();
  });

  // No server-initiated stream: the spec lets a server answer GET with 405.
  app.get(path, async (_req, reply) =>
    reply
      .code(405)
      .header('allow', 'POST, DELETE')
      .send(rpcError(null, RpcError.invalidRequest, 'Method not allowed')),
  );
}

function header(req: FastifyRequest, name: string): string | undefined {
  const value = req.headers[name];
  return typeof value === 'string' && value !== '' ? value : undefined;
}

interface Pace {
  chunks: number;
  intervalMs: number;
  breakAfter: number | null;
  as: 'json' | 'sse';
}

/** Consumes one use of the slow-streaming control, if set. */
function takeStreaming(ctx: SimContext): Pace | undefined {
  const streaming = ctx.mcpStreaming;
  if (!streaming) return undefined;
  if (streaming.remaining !== null) {
    streaming.remaining -= 1;
    if (streaming.remaining <= 0) ctx.mcpStreaming = null;
  }
  return { chunks: streaming.chunks, intervalMs: streaming.intervalMs, breakAfter: streaming.breakAfter, as: streaming.as };
}

/** How often a slow SSE answer says it is still working: a stream that keeps sending. */
const KEEP_ALIVE_MS = 200;

/**
 * A tool that takes `delayMs` to answer (a slow-answer fault). As JSON, status, headers and
 * body all come at the end, as a JSON-answering server sends them; as SSE, the headers go at
 * once and a keep-alive comment every 200 ms until the answer. A client that hangs up ends it
 * (the request log shows it abandoned).
 */
function sendSlowly(ctx: SimContext, req: FastifyRequest, reply: FastifyReply, response: JsonRpcResponse, slow: FaultSpec) {
  const gone = new AbortController();
  reply.raw.once('close', () => gone.abort());
  const stop = AbortSignal.any([gone.signal, ctx.closing]);
  const waitMs = slow.delayMs ?? 0;
  if (slow.answerAs === 'json') {
    return delay(waitMs, undefined, { signal: stop }).then(
      () => reply.header('content-type', 'application/json').send(JSON.stringify(response)),
      () => {
        reply.hijack();
        req.raw.destroy();
        return reply;
      },
    );
  }
  reply.header('content-type', 'text/event-stream').header('cache-control', 'no-cache');
  const until = performance.now() + waitMs;
  return reply.send(
    Readable.from(
      (async function* () {
        yield ': working\n\n';
        for (;;) {
          const left = until - performance.now();
          if (left <= 0) break;
          try {
            await delay(Math.min(KEEP_ALIVE_MS, left), undefined, { signal: stop });
          } catch {
            return;
          }
          if (until - performance.now() > 0) yield ': still working\n\n';
        }
        yield sseEvent(response);
      })(),
      { objectMode: false },
    ),
  );
}

function sseEvent(message: unknown): string {
  return `event: message\ndata: ${JSON.stringify(message)}\n\n`;
}

function sendSse(ctx: SimContext, reply: FastifyReply, response: JsonRpcResponse, streaming: Pace | undefined) {
  reply.header('content-type', 'text/event-stream').header('cache-control', 'no-cache');
  if (!streaming) return reply.send(sseEvent(response));
  // Progress notices first, each its own write, then the answer: a proxy that buffers shows
  // up as every piece arriving at once.
  const pieces = Array.from({ length: streaming.chunks - 1 }, (_, i) =>
    sseEvent({
      jsonrpc: '2.0',
      method: 'notifications/message',
      params: { level: 'info', logger: 'composio', data: `working (${i + 1}/${streaming.chunks - 1})` },
    }),
  );
  pieces.push(sseEvent(response));
  return reply.send(paced(pieces, streaming, ctx.closing));
}

function sendJson(ctx: SimContext, reply: FastifyReply, response: JsonRpcResponse, streaming: Pace) {
  reply.header('content-type', 'application/json');
  const text = JSON.stringify(response);
  const size = Math.ceil(text.length / streaming.chunks);
  const pieces = Array.from({ length: streaming.chunks }, (_, i) => text.slice(i * size, (i + 1) * size)).filter((p) => p !== '');
  return reply.send(paced(pieces, streaming, ctx.closing));
}

function paced(pieces: string[], pace: { intervalMs: number; breakAfter: number | null }, closing: AbortSignal): Readable {
  const { intervalMs, breakAfter } = pace;
  return Readable.from(
    (async function* () {
      for (const [index, piece] of pieces.entries()) {
        // The stream failing after the headers went out: the connection is dropped mid-answer.
        if (index === breakAfter) throw new Error('simulated connection loss mid-answer');
        if (index > 0) {
          try {
            await delay(intervalMs, undefined, { signal: closing });
          } catch {
            return;
          }
        }
        yield piece;
      }
    })(),
    { objectMode: false },
  );
}
