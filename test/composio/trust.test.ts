import { describe, expect, it } from 'vitest';
import { createHostTrust } from '../../src/composio/index.js';

describe('createHostTrust', () => {
  it('with the production base URL trusts only https composio.dev hosts', () => {
    const trusted = createHostTrust('https://backend.composio.dev');
    expect(trusted('https://backend.composio.dev/tool_router/trs_1/mcp')).toBe(true);
    expect(trusted('https://connect.composio.dev/link/ln_1')).toBe(true);
    expect(trusted('https://COMPOSIO.DEV/')).toBe(true);
    expect(trusted('http://127.0.0.1:8080/x')).toBe(false);
    expect(trusted('https://composio.dev.example.com/')).toBe(false);
    expect(trusted('https://xcomposio.dev/')).toBe(false);
    expect(trusted('javascript:alert(1)')).toBe(false);
    expect(trusted('https://:pw@backend.composio.dev/')).toBe(false);
  });

  it('trusts the configured origin exactly, whatever path prefix the base URL has', () => {
    const trusted = createHostTrust('http://composio-proxy.internal:8080/prefix');
    expect(trusted('http://composio-proxy.internal:8080/other/path')).toBe(true);
    expect(trusted('https://composio-proxy.internal:8080/')).toBe(false);
    expect(trusted('http://composio-proxy.internal:8081/')).toBe(false);
  });
});
