import { PassThrough, pipeline, Readable, Transform, type TransformCallback } from 'node:stream';
import type { ComposioGateway } from '../composio/index.js';
import { ComposioFailure, isComposioNotFound, isSignedOutText, reconnectMessage } from '../composio/index.js';
import type { Db } from '../db/database.js';
import { AppError } from '../errors.js';
import type { Installation } from '../installations/installations.js';
import { withSession } from './session.js';
import { forgetMcpSession, isGivenMcpSession, rememberMcpSession } from './store.js';

/** Headers of the client's request that mean something to the MCP server. */
const FORWARDED_REQUEST_HEADERS = ['accept', 'content-type', 'mcp-session-id', 'mcp-protocol-version', 'last-event-id'];
/** Headers of the MCP server's answer the client reads. */
const FORWARDED_RESPONSE_HEADERS = ['content-type', 'mcp-session-id', 'mcp-protocol-version'];

export interface McpRequest {
  method: 'POST' | 'DELETE' | 'GET';
  headers: Record<string, string | string[] | undefined>;
  body: Buffer | undefined;
  /** Aborted when the client goes away, so the upstream request ends too. */
  signal: AbortSignal;
  /**
   * `MCP_TIMEOUT_MS`: how long the MCP server may take to send its status and headers (a tool
   * call may run for minutes first), and then how long any silence in its answer may last.
   */
  timeoutMs: number;
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
 * An `initialize` always starts a new MCP session: the id a client sends with it (hosts resend
 * their last one) is not passed on, however old.
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
  if (isInitialize(request.body)) delete headers['mcp-session-id'];
  // Only MCP sessions Composio gave this installation go upstream: another installation's id
  // (or a made-up one) is answered here as an unknown MCP session, as the MCP server would.
  const resumed = headers['mcp-session-id'];
  if (resumed !== undefined && !(await isGivenMcpSession(db, installation.id, resumed))) {
    throw new AppError(404, 'mcp_session_not_found', 'this MCP session is unknown or has ended; initialize a new one');
  }

  // Composio's own failures arrive as errors (a Session it no longer knows is replaced once);
  // the MCP server's answers to the client's requests, errors included, pass through as they are.
  // The body has no deadline of its own, only a bound on silence (see `relay`), which ends the
  // upstream request through this controller.
  const silent = new AbortController();
  const upstream = await withSession(db, composio, installation, (session) =>
    composio.fetchMcp(session.mcpUrl, {
      method: request.method,
      headers,
      ...(request.body && request.method === 'POST' ? { body: new Uint8Array(request.body) } : {}),
      signal: AbortSignal.any([request.signal, silent.signal]),
      timeoutMs: request.timeoutMs,
    }),
  ).catch((error: unknown) => {
    // A 404 here would tell the MCP client its MCP session expired: it is Composio failing.
    if (!isComposioNotFound(error)) throw error;
    throw new ComposioFailure(
      'unavailable',
      'Composio does not know this installation’s Session even after it was replaced; try again shortly.',
      {
        subject: 'Session',
      },
    );
  });

  const answerHeaders: Record<string, string> = {};
  for (const name of FORWARDED_RESPONSE_HEADERS) {
    const value = upstream.headers.get(name);
    if (value !== null) answerHeaders[name] = value;
  }
  try {
    const given = answerHeaders['mcp-session-id'];
    if (given !== undefined && given !== resumed && upstream.ok) await rememberMcpSession(db, installation.id, given);
    // Ended by the client, or expired upstream: the id opens nothing any more.
    if (resumed !== undefined && ((request.method === 'DELETE' && upstream.ok) || upstream.status === 404)) {
      await forgetMcpSession(db, installation.id, resumed);
    }
  } catch (error) {
    await upstream.body?.cancel().catch(() => {});
    throw error;
  }
  if (!upstream.body) return { status: upstream.status, headers: answerHeaders, body: null };
  const contentType = answerHeaders['content-type'] ?? '';
  let noted: Transform = new PassThrough();
  if (contentType.startsWith('text/event-stream')) {
    answerHeaders['x-accel-buffering'] = 'no';
    noted = new SseReconnectNote();
  } else if (contentType.includes('json')) {
    noted = new JsonReconnectNote();
  }
  const idle: Idle = { timeoutMs: request.timeoutMs, end: () => silent.abort(), ended: () => silent.signal.aborted };
  return { status: upstream.status, headers: answerHeaders, body: relay(upstream.body, noted, request.signal, idle) };
}

/** Whether the body is one JSON-RPC `initialize` request. */
function isInitialize(body: Buffer | undefined): boolean {
  const message = parsedMessage(body);
  return !Array.isArray(message) && message?.method === 'initialize';
}

type RpcMessage = { id?: unknown; method?: unknown } | null;

function parsedMessage(body: Buffer | undefined): RpcMessage | RpcMessage[] | undefined {
  if (!body || body.length === 0) return undefined;
  try {
    const parsed: unknown = JSON.parse(body.toString('utf8'));
    return typeof parsed === 'object' ? (parsed as RpcMessage | RpcMessage[]) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Whether an MCP request counts against `MCP_REQUESTS_PER_MINUTE`: every one but those that
 * carry no request the server works on — a notification (no `id`), a ping, an answer to the
 * server (no `method`), or a batch of only those. A body that is not JSON counts.
 */
export function countsAsMcpRequest(body: Buffer | undefined): boolean {
  const message = parsedMessage(body);
  if (message === undefined) return true;
  const messages = Array.isArray(message) ? message : [message];
  if (messages.length === 0) return true;
  return messages.some(
    (m) => typeof m !== 'object' || m === null || (m.id !== undefined && m.id !== null && m.method !== undefined && m.method !== 'ping'),
  );
}

/**
 * The upstream body through `noted`, as one stream whose failure is the answer's failure: an
 * upstream that breaks off, or a client that hung up (whose signal aborted the fetch), destroys
 * the returned stream with the error — never an `error` event nobody listens to, which would
 * stop the process. `pipe` keeps backpressure: a client that stops reading stops the reads
 * from upstream. When the client goes, the HTTP layer destroys the returned stream, which
 * cancels the upstream body.
 */
function relay(body: ReadableStream<Uint8Array>, noted: Transform, clientGone: AbortSignal, idle: Idle): Readable {
  const source = Readable.from(upstreamChunks(body, clientGone, idle), { objectMode: false });
  pipeline(source, noted, () => {
    // Each stream is destroyed with the error; the HTTP layer watches `noted` and ends the answer.
  });
  return noted;
}

/** The bound on an answer's silence, and how it ends the upstream request. */
interface Idle {
  readonly timeoutMs: number;
  end(): void;
  ended(): boolean;
}

/**
 * The upstream body's chunks. A stream that keeps sending runs as long as it likes; one silent
 * for `idle.timeoutMs` is ended (the upstream request with it), as Composio failing.
 */
async function* upstreamChunks(body: ReadableStream<Uint8Array>, clientGone: AbortSignal, idle: Idle): AsyncGenerator<Uint8Array> {
  let timer = setTimeout(idle.end, idle.timeoutMs);
  try {
    for await (const chunk of body) {
      clearTimeout(timer);
      yield chunk;
      timer = setTimeout(idle.end, idle.timeoutMs);
    }
  } catch (error) {
    if (clientGone.aborted) throw error;
    // Before the first byte has gone out this is the answer (502); after, the answer is cut off.
    const seconds = Math.max(1, Math.round(idle.timeoutMs / 1000));
    const why = idle.ended() ? `sent nothing for ${seconds} s` : 'broke off its answer';
    throw new ComposioFailure('unavailable', `Composio’s MCP endpoint ${why}; try again.`, { subject: 'Session' });
  } finally {
    clearTimeout(timer);
  }
}

/** The note added to a signed-out tool error. */
export const RECONNECT_NOTE = `Note from OpenMausBot: ${reconnectMessage()}`;

/** Adds the reconnect note to a JSON-RPC message whose error says the account is signed out. */
function withReconnectNote(message: unknown): unknown {
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
