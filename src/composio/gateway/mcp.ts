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
        { subject: 'Session', signal: init.signal },
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
          if (failure === undefined) return response;
          await response.body?.cancel();
          throw failure;
        },
        (response) => (response.ok ? 'ok' : `http_${response.status}`),
      );
    },
    isTrustedHost,
  };
}

/** Composio's own failure in an MCP answer, or undefined when the answer is the MCP server's. */
function composioFailureIn(response: Response, resumesMcpSession: boolean): ComposioFailure | undefined {
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
  if (response.status >= 500) {
    return unavailable(`Composio’s MCP endpoint failed (HTTP ${response.status}); try again shortly.`, 'Session');
  }
  return undefined;
}
