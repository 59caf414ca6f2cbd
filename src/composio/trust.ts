/**
 * Which URLs the broker may hand to a client (consent links) or send the project key to (MCP):
 * `https:` on `composio.dev` or one of its subdomains, or exactly the origin of the configured
 * Composio base URL — which is how the loopback simulator is trusted in sandbox mode without
 * trusting loopback in general.
 */
export function createHostTrust(baseUrl: string): (url: string) => boolean {
  const configuredOrigin = new URL(baseUrl).origin;
  return (candidate: string): boolean => {
    let url: URL;
    try {
      url = new URL(candidate);
    } catch {
      return false;
    }
    // Credentials in a URL are never legitimate here and can disguise the real host.
    if (url.username !== '' || url.password !== '') return false;
    if (url.origin === configuredOrigin) return true;
    if (url.protocol !== 'https:') return false;
    const host = url.hostname.toLowerCase();
    return host === 'composio.dev' || host.endsWith('.composio.dev');
  };
}
