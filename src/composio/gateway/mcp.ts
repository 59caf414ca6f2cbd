import { retryAfterFromHeaders, unavailable } from '../errors.js';
import { ComposioFailure } from '../failure.js';
import type { ComposioGateway } from '../types.js';
import type { CallCore } from './call.js';

/**
 * Requests to a Session's MCP endpoint, with the project key added, on the same budget,
 * deadline and failure path as every other call. Composio's own failures become
 * `ComposioFailure`s here; the MCP server's answers to the client pass through as they are.
 */
export function mcpCalls(
  core: CallCore,
  apiKey: string,
  isTrustedHost: (url: string) => boolean,
): Pick<ComposioGateway, 'fetchMcp' | 'isTrustedHost'> {
  return {
    fetchMcp(url, init) {
      if (!isTrustedHost(url)) {
        return Promise.reject(core.refuse('mcp', unavailable('the Session’s MCP endpoint is not on a trusted Composio host')));
      }
      const resumesMcpSession = 'mcp-session-id' in init.headers;
      return core.call(
        'mcp',
        1,
        { subject: 'Session', signal: init.signal, ...(init.timeoutMs === undefined ? {} : { timeoutMs: init.timeoutMs }) },
        async (signal) => {
          let response: Response;
          try {
            response = await fetch(url, {
              method: init.method,
              headers: { ...init.headers, 'x-api-key': apiKey },
              ...(init.body ? { body: init.body } : {}),
              redirect: 'error',
              signal,
            });
          } catch (error) {
            // The deadline or the client: the call core tells them apart.
            if (signal.aborted) throw error;
            throw unavailable('Composio’s MCP endpoint could not be reached; try again shortly.');
          }
          const failure = composioFailureIn(response, resumesMcpSession);
          if (failure !== undefined) {
            await response.body?.cancel();
            throw failure;
          }
          if (response.status < 400) return response;
          // An error status passes on only as the MCP server's answer: a JSON-RPC message.
          const text = await readBounded(response, MAX_ERROR_BODY_BYTES);
          if (text !== undefined && isJsonRpc(text)) return new Response(text, { status: response.status, headers: response.headers });
          throw unavailable(`Composio’s MCP endpoint refused the request (HTTP ${response.status}); try again shortly.`, 'Session');
        },
        (response) => (response.ok ? 'ok' : `http_${response.status}`),
      );
    },
    isTrustedHost,
  };
}

/** An error answer larger than this is not the MCP server's JSON-RPC error. */
const MAX_ERROR_BODY_BYTES = 64 * 1024;

/**
 * Composio's own failure in an MCP answer, or undefined when the answer may be the MCP
 * server's. Statuses that speak of the project key (`401`, `403`, `407`) are always Composio's:
 * passed on, the app would take them as "your installation token is bad".
 */
function composioFailureIn(response: Response, resumesMcpSession: boolean): ComposioFailure | undefined {
  if (response.status === 401 || response.status === 407) {
    return unavailable("Composio refused the managed service's project key; the operators have to fix it.", 'Session');
  }
  if (response.status === 403) {
    return new ComposioFailure(
      'refused',
      "Composio does not allow the managed service's project key to use this Session; the operators have to fix it.",
      { reason: 'forbidden', subject: 'Session' },
    );
  }
  // A 404 to a fresh request (no MCP session yet) means the Tool Router Session is gone; to a
  // resumed one it means the MCP session expired, which the client handles itself.
  if (response.status === 404 && !resumesMcpSession) {
    return new ComposioFailure('not_found', 'Composio does not know this Session.', { subject: 'Session' });
  }
  if (response.status === 429) {
    const retryAfterMs = retryAfterFromHeaders(response.headers);
    return new ComposioFailure('rate_limited', 'Composio is rate-limiting the managed service; try again shortly.', {
      subject: 'Session',
      retryAfterMs,
    });
  }
  if (response.status >= 500 || response.status === 408) {
    return unavailable(`Composio’s MCP endpoint failed (HTTP ${response.status}); try again shortly.`, 'Session');
  }
  return undefined;
}

/** The body as text, or undefined when it is longer than `limit` bytes. */
async function readBounded(response: Response, limit: number): Promise<string | undefined> {
  if (!response.body) return '';
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel();
      return undefined;
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** Whether `text` is a JSON-RPC message (or batch), bare or as server-sent events. */
function isJsonRpc(text: string): boolean {
  const data = text.trimStart().startsWith('{') || text.trimStart().startsWith('[') ? text : sseData(text);
  try {
    const message: unknown = JSON.parse(data);
    const first: unknown = Array.isArray(message) ? message[0] : message;
    return typeof first === 'object' && first !== null && (first as { jsonrpc?: unknown }).jsonrpc === '2.0';
  } catch {
    return false;
  }
}

function sseData(text: string): string {
  return text
    .split(/\r?\n/)
    .filter((line) => line.startsWith('data:'))
    .map((line) => line.slice(5).trim())
    .join('');
}
