import { Readable, Transform, type TransformCallback } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import type { ComposioGateway } from '../composio/index.js';
import { isSignedOutText, reconnectMessage } from '../composio/index.js';
import type { Db } from '../db/database.js';
import type { Installation } from '../installations/installations.js';
import { withSession } from './session.js';

/** Headers of the client's request that mean something to the MCP server. */
const FORWARDED_REQUEST_HEADERS = ['accept', 'content-type', 'mcp-session-id', 'mcp-protocol-version', 'last-event-id'];
/** Headers of the MCP server's answer the client reads. */
const FORWARDED_RESPONSE_HEADERS = ['content-type', 'mcp-session-id', 'mcp-protocol-version'];

/** Tool calls may run for minutes; the client itself waits ten. */
export const MCP_TIMEOUT_MS = 10 * 60 * 1000;

export interface McpRequest {
  method: 'POST' | 'DELETE' | 'GET';
  headers: Record<string, string | string[] | undefined>;
  body: Buffer | undefined;
  /** Aborted when the client goes away, so the upstream request ends too. */
  signal: AbortSignal;
}

export interface McpAnswer {
  status: number;
  headers: Record<string, string>;
  /** Streamed as it arrives: server-sent events are never buffered. */
  body: Readable | null;
}

/**
 * Forwards one MCP Streamable-HTTP request to the installation's Session MCP endpoint, adding
 * the project key on the way (the client never holds it). A Session Composio no longer knows
 * is replaced once. Signed-out errors in the answer get a note telling the bot how to recover.
 */
export async function proxyMcp(
  db: Db,
  composio: ComposioGateway,
  installation: Pick<Installation, 'id' | 'composioUserId'>,
  request: McpRequest,
): Promise<McpAnswer> {
  const headers: Record<string, string> = {};
  for (const name of FORWARDED_REQUEST_HEADERS) {
    const value = request.headers[name];
    if (typeof value === 'string') headers[name] = value;
  }

  // Composio's own failures arrive as errors (a Session it no longer knows is replaced once);
  // the MCP server's answers to the client's requests, errors included, pass through as they are.
  const upstream = await withSession(db, composio, installation, (session) =>
    composio.fetchMcp(session.mcpUrl, {
      method: request.method,
      headers,
      ...(request.body && request.method === 'POST' ? { body: new Uint8Array(request.body) } : {}),
      signal: AbortSignal.any([request.signal, AbortSignal.timeout(MCP_TIMEOUT_MS)]),
    }),
  );

  const answerHeaders: Record<string, string> = {};
  for (const name of FORWARDED_RESPONSE_HEADERS) {
    const value = upstream.headers.get(name);
    if (value !== null) answerHeaders[name] = value;
  }
  if (!upstream.body) return { status: upstream.status, headers: answerHeaders, body: null };
  const source = Readable.fromWeb(upstream.body as WebReadableStream<Uint8Array>);
  const contentType = answerHeaders['content-type'] ?? '';
  if (contentType.startsWith('text/event-stream')) {
    answerHeaders['x-accel-buffering'] = 'no';
    return { status: upstream.status, headers: answerHeaders, body: source.pipe(new SseReconnectNote()) };
  }
  if (contentType.includes('json')) return { status: upstream.status, headers: answerHeaders, body: source.pipe(new JsonReconnectNote()) };
  return { status: upstream.status, headers: answerHeaders, body: source };
}

/** The note added to a signed-out tool error. */
export const RECONNECT_NOTE = `Note from OpenMausBot: ${reconnectMessage()}`;

/** Adds the reconnect note to a JSON-RPC message whose error says the account is signed out. */
export function withReconnectNote(message: unknown): unknown {
  if (Array.isArray(message)) return message.map(withReconnectNote);
  if (!message || typeof message !== 'object') return message;
  const rpc = message as { result?: { content?: unknown; isError?: boolean }; error?: { message?: unknown } };
  if (
    rpc.error &&
    typeof rpc.error.message === 'string' &&
    isSignedOutText(rpc.error.message) &&
    !rpc.error.message.includes(RECONNECT_NOTE)
  ) {
    return { ...rpc, error: { ...rpc.error, message: `${rpc.error.message}\n${RECONNECT_NOTE}` } };
  }
  const content = rpc.result?.content;
  if (Array.isArray(content)) {
    const texts = content.filter((c): c is { type: 'text'; text: string } => c?.type === 'text' && typeof c.text === 'string');
    if (texts.some((c) => isSignedOutText(c.text)) && !texts.some((c) => c.text === RECONNECT_NOTE)) {
      return { ...rpc, result: { ...rpc.result, content: [...content, { type: 'text', text: RECONNECT_NOTE }] } };
    }
  }
  return message;
}

/** A JSON answer, read whole (it is one message), noted if needed. */
class JsonReconnectNote extends Transform {
  private chunks: Buffer[] = [];
  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    this.chunks.push(chunk);
    done();
  }
  override _flush(done: TransformCallback): void {
    const text = Buffer.concat(this.chunks).toString('utf8');
    try {
      const noted = withReconnectNote(JSON.parse(text));
      done(null, JSON.stringify(noted));
    } catch {
      done(null, text);
    }
  }
}

/**
 * Server-sent events passed on one complete event at a time, as soon as each arrives; an event
 * whose data is a signed-out error is rewritten with the note, every other byte is untouched.
 */
class SseReconnectNote extends Transform {
  private pending = '';
  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    this.pending += chunk.toString('utf8');
    let out = '';
    let consumed = 0;
    for (const end of this.pending.matchAll(/\r?\n\r?\n/g)) {
      const event = this.pending.slice(consumed, end.index);
      out += noteEvent(event) + end[0];
      consumed = end.index + end[0].length;
    }
    this.pending = this.pending.slice(consumed);
    done(null, out.length > 0 ? out : undefined);
  }
  override _flush(done: TransformCallback): void {
    done(null, this.pending.length > 0 ? noteEvent(this.pending) : undefined);
  }
}

function noteEvent(event: string): string {
  const lines = event.split(/\r?\n/);
  const dataLines = lines.filter((l) => l.startsWith('data:'));
  if (dataLines.length === 0) return event;
  const data = dataLines.map((l) => l.slice(5).replace(/^ /, '')).join('\n');
  if (!isSignedOutText(data)) return event;
  let noted: unknown;
  try {
    noted = withReconnectNote(JSON.parse(data));
  } catch {
    return event;
  }
  const rest = lines.filter((l) => !l.startsWith('data:'));
  return [...rest, `data: ${JSON.stringify(noted)}`].join('\n');
}
