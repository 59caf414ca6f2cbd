import { retryAfterFromHeaders, toFailure, unavailable } from '../errors.js';
import type { ComposioGateway } from '../types.js';
import type { CallCore } from './call.js';

/** Requests to a Session's MCP endpoint, with the project key added, within the shared budget. */
export function mcpCalls(
  core: CallCore,
  apiKey: string,
  isTrustedHost: (url: string) => boolean,
): Pick<ComposioGateway, 'fetchMcp' | 'isTrustedHost'> {
  const { budget, report } = core;
  return {
    async fetchMcp(url, init) {
      const started = performance.now();
      if (!isTrustedHost(url)) {
        const failure = unavailable('the Session’s MCP endpoint is not on a trusted Composio host');
        report('mcp', failure.code, started);
        throw failure;
      }
      try {
        await budget.acquire(1);
      } catch (error) {
        const failure = toFailure(error, { timeoutMs: core.timeoutMs });
        report('mcp', failure.code, started);
        throw failure;
      }
      let response: Response;
      try {
        response = await fetch(url, {
          method: init.method,
          headers: { ...init.headers, 'x-api-key': apiKey },
          ...(init.body ? { body: init.body } : {}),
          redirect: 'error',
          signal: init.signal,
        });
      } catch (error) {
        if (init.signal.aborted) throw error;
        const failure = unavailable('Composio’s MCP endpoint could not be reached; try again shortly.');
        report('mcp', failure.code, started);
        throw failure;
      }
      if (response.status === 429) budget.pause(retryAfterFromHeaders(response.headers));
      report('mcp', response.ok ? 'ok' : `http_${response.status}`, started);
      return response;
    },
    isTrustedHost,
  };
}
