import { describe, expect, it } from 'vitest';
import type { ConnectedAccount, SessionToolkit } from '../composio/index.js';
import { mergeInventory } from './inventory.js';

/**
 * The inventory's merge reads no owner from Composio's answers: `user_id` is deprecated and may
 * be absent (composio-api.md §10 row 6). The accounts are whoever's the list was filtered for.
 */

const account = (over: Partial<ConnectedAccount>): ConnectedAccount =>
  ({ id: 'ca_1', alias: null, status: 'ACTIVE', toolkit: 'gmail', createdAt: '2025-01-01T00:00:00Z', ...over }) as ConnectedAccount;

describe('mergeInventory', () => {
  it('shows the listed accounts whether or not the answer names their owner', () => {
    const withoutOwner = account({ id: 'ca_a', alias: 'work' });
    const otherName = account({ id: 'ca_b', alias: 'home', userId: 'somebody-else' });
    const services = mergeInventory([], [withoutOwner, otherName], new Set());
    expect(services.gmail?.accounts.map((a) => a.id).sort()).toEqual(['ca_a', 'ca_b']);
    expect(services.gmail).toMatchObject({ connected: true, status: 'ACTIVE' });
  });

  it('marks the no-auth apps connected, and adds the Session’s selected account when the list lacks it', () => {
    const toolkits: SessionToolkit[] = [
      { slug: 'slack', name: 'Slack', isNoAuth: false, connectedAccount: { id: 'ca_s', status: 'ACTIVE' } },
    ];
    const services = mergeInventory(toolkits, [], new Set(['hackernews']));
    expect(services).toEqual({
      hackernews: { connected: true, pending: false, status: 'ACTIVE', accounts: [] },
      slack: { connected: true, pending: false, status: 'ACTIVE', accounts: [{ id: 'ca_s', status: 'ACTIVE' }] },
    });
  });
});
