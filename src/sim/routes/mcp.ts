import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { setTimeout as delay } from 'node:timers/promises';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { SimContext } from '../context.js';
import { handleRpc, type JsonRpcRequest, type JsonRpcResponse, RpcError } from '../mcp.js';
import { getSession } from '../sessions.js';

/**
 * The Tool Router's MCP endpoint, `{origin}/tool_router/<session>/mcp`, over Streamable HTTP:
 * JSON-RPC POSTs answered as JSON or as an SSE stream (whichever the client accepts; SSE when
 * it accepts both), an `mcp-session-id` issued by `initialize` and required afterwards, and
 * DELETE to end that MCP session.
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
    const sse = accept.includes('text/event-stream');
    if (!sse && !accept.includes('application/json') && !accept.includes('*/*')) {
      return reply.code(406).send(rpcError(null, RpcError.invalidRequest, 'Accept must include application/json or text/event-stream'));
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
    return sse ? sendSse(ctx, reply, response) : sendJson(ctx, reply, response);
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

/** Consumes one use of the slow-streaming control, if set. */
function takeStreaming(ctx: SimContext): { chunks: number; intervalMs: number; breakAfter: number | null } | undefined {
  const streaming = ctx.mcpStreaming;
  if (!streaming) return undefined;
  if (streaming.remaining !== null) {
    streaming.remaining -= 1;
    if (streaming.remaining <= 0) ctx.mcpStreaming = null;
  }
  return { chunks: streaming.chunks, intervalMs: streaming.intervalMs, breakAfter: streaming.breakAfter };
}

function sseEvent(message: unknown): string {
  return `event: message\ndata: ${JSON.stringify(message)}\n\n`;
}

function sendSse(ctx: SimContext, reply: FastifyReply, response: JsonRpcResponse) {
  reply.header('content-type', 'text/event-stream').header('cache-control', 'no-cache');
  const streaming = takeStreaming(ctx);
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

function sendJson(ctx: SimContext, reply: FastifyReply, response: JsonRpcResponse) {
  reply.header('content-type', 'application/json');
  const streaming = takeStreaming(ctx);
  const text = JSON.stringify(response);
  if (!streaming) return reply.send(text);
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
