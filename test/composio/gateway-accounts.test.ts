import { afterEach, describe, expect, it } from 'vitest';
import { answered, connectAccount, type Harness, startHarness } from './harness.js';

/** Connected accounts: listing with cursors, reading, deleting with revocation. */

let h: Harness;
afterEach(async () => h?.close());

describe('listing connected accounts', () => {
  it('pages through 120 accounts 50 at a time', async () => {
    h = await startHarness();
    for (let i = 0; i < 120; i++) {
      h.sim.controls.createAccount({ userId: 'omb_many', toolkit: i % 2 ? 'gmail' : 'slack', alias: `a${i}`, status: 'ACTIVE' });
    }
    h.sim.controls.createAccount({ userId: 'omb_other', toolkit: 'gmail', status: 'ACTIVE' });

    const sizes: number[] = [];
    const ids = new Set<string>();
    let cursor: string | undefined;
    do {
      const page = await h.gateway.listConnectedAccounts({ userId: 'omb_many', limit: 50, ...(cursor ? { cursor } : {}) });
      sizes.push(page.items.length);
      for (const a of page.items) ids.add(a.id);
      expect(page.items.every((a) => a.userId === 'omb_many')).toBe(true);
      cursor = page.nextCursor ?? undefined;
    } while (cursor);
    expect(sizes).toEqual([50, 50, 20]);
    expect(ids.size).toBe(120);
    // The SDK sent the user filter and the page size on every page.
    expect(h.sim.controls.requests().every((r) => r.query.includes('user_ids=omb_many') && r.query.includes('limit=50'))).toBe(true);
  });

  it('filters by toolkit and status (sent comma-joined)', async () => {
    h = await startHarness();
    h.sim.controls.createAccount({ userId: 'u', toolkit: 'gmail', alias: 'a', status: 'ACTIVE' });
    h.sim.controls.createAccount({ userId: 'u', toolkit: 'gmail', alias: 'b', status: 'EXPIRED' });
    h.sim.controls.createAccount({ userId: 'u', toolkit: 'gmail', alias: 'c', status: 'FAILED' });
    h.sim.controls.createAccount({ userId: 'u', toolkit: 'slack', alias: 'd', status: 'ACTIVE' });
    const page = await h.gateway.listConnectedAccounts({
      userId: 'u',
      toolkitSlugs: ['gmail'],
      statuses: ['ACTIVE', 'EXPIRED'],
      limit: 10,
    });
    expect(page.items.map((a) => a.alias).sort()).toEqual(['a', 'b']);
    expect(page.nextCursor).toBeNull();
    expect(h.sim.controls.requests()[0]?.query).toContain('statuses=ACTIVE%2CEXPIRED');
  });
});

describe('reading one account', () => {
  it('returns only the broker’s fields: never state, tokens or params', async () => {
    h = await startHarness();
    const { accountId } = await connectAccount(h, 'omb_user1', 'gmail', 'work');
    const account = await h.gateway.findConnectedAccount('omb_user1', accountId);
    expect(account).toEqual({
      id: accountId,
      alias: 'work',
      status: 'ACTIVE',
      toolkit: 'gmail',
      userId: 'omb_user1',
      createdAt: expect.any(String),
    });
    expect(JSON.stringify(account)).not.toMatch(/token|sim-/);
  });

  it('finds it in its user’s list, by the user and id filters, in one call', async () => {
    h = await startHarness();
    const { accountId } = await connectAccount(h, 'omb_user1', 'gmail', 'work');
    const before = h.sim.controls.requests().length;
    expect(await h.gateway.findConnectedAccount('omb_user1', accountId)).toMatchObject({ id: accountId });
    const sent = h.sim.controls.requests().slice(before);
    expect(sent.map((r) => `${r.method} ${r.path}`)).toEqual(['GET /api/v3.1/connected_accounts']);
    expect(sent[0]?.query).toContain('user_ids=omb_user1');
    expect(sent[0]?.query).toContain(`connected_account_ids=${accountId}`);
  });

  it('finds nothing for another user’s account or an unknown id', async () => {
    h = await startHarness();
    const { accountId } = await connectAccount(h, 'omb_user1', 'gmail', 'work');
    expect(await h.gateway.findConnectedAccount('omb_user2', accountId)).toBeNull();
    expect(await h.gateway.findConnectedAccount('omb_user1', 'ca_nope')).toBeNull();
  });
});

describe('ownership without user_id in Composio’s answers', () => {
  it('lists and finds the user’s accounts from answers that name no user', async () => {
    h = await startHarness();
    const mine = h.sim.controls.createAccount({ userId: 'omb_mine', toolkit: 'gmail', alias: 'a', status: 'ACTIVE' });
    h.sim.controls.createAccount({ userId: 'omb_theirs', toolkit: 'gmail', alias: 'b', status: 'ACTIVE' });
    // What Composio answers: no user_id at all (deprecated).
    const raw = await fetch(`${h.sim.origin}/api/v3.1/connected_accounts?user_ids=omb_mine`, { headers: { 'x-api-key': h.sim.apiKey } });
    const body = (await raw.json()) as { items: Record<string, unknown>[] };
    expect(body.items.map((a) => a.id)).toEqual([mine.id]);
    expect(body.items[0]).not.toHaveProperty('user_id');

    const page = await h.gateway.listConnectedAccounts({ userId: 'omb_mine', limit: 50 });
    expect(page.items).toMatchObject([{ id: mine.id, userId: 'omb_mine' }]);
    expect(await h.gateway.findConnectedAccount('omb_mine', mine.id)).toMatchObject({ id: mine.id, userId: 'omb_mine' });
    expect(await h.gateway.findConnectedAccount('omb_theirs', mine.id)).toBeNull();
  });

  it('works the same where Composio still sends user_id (the kinder reading)', async () => {
    h = await startHarness({}, { readings: { accountUserIds: true } });
    const mine = h.sim.controls.createAccount({ userId: 'omb_mine', toolkit: 'gmail', alias: 'a', status: 'ACTIVE' });
    const raw = await fetch(`${h.sim.origin}/api/v3.1/connected_accounts/${mine.id}`, { headers: { 'x-api-key': h.sim.apiKey } });
    expect(await raw.json()).toMatchObject({ id: mine.id, user_id: 'omb_mine' });
    expect(await h.gateway.findConnectedAccount('omb_mine', mine.id)).toMatchObject({ id: mine.id, userId: 'omb_mine' });
    expect(await h.gateway.findConnectedAccount('omb_theirs', mine.id)).toBeNull();
  });
});

describe('deleting an account', () => {
  it('revokes, then deletes', async () => {
    h = await startHarness();
    const { accountId } = await connectAccount(h, 'omb_user1', 'gmail', 'work');
    expect(await h.gateway.deleteConnectedAccount(accountId, { revoke: true })).toEqual({ revoked: true });
    expect(
      h.sim.controls
        .requests()
        .slice(-2)
        .map((r) => `${r.method} ${r.path} ${r.status}`),
    ).toEqual([`POST /api/v3.1/connected_accounts/${accountId}/revoke 200`, `DELETE /api/v3.1/connected_accounts/${accountId} 200`]);
    expect(await h.gateway.findConnectedAccount('omb_user1', accountId)).toBeNull();
  });

  it('still deletes when the app cannot revoke programmatically', async () => {
    h = await startHarness();
    const { accountId } = await connectAccount(h, 'omb_user1', 'github', 'work');
    expect(await h.gateway.deleteConnectedAccount(accountId, { revoke: true })).toEqual({ revoked: false });
    expect(h.sim.controls.state().accounts).toEqual([]);
  });

  it('still deletes an account that has nothing to revoke (not ACTIVE)', async () => {
    h = await startHarness();
    const pending = h.sim.controls.createAccount({ userId: 'u', toolkit: 'gmail', alias: 'x' });
    expect(await h.gateway.deleteConnectedAccount(pending.id, { revoke: true })).toEqual({ revoked: false });
    expect(h.sim.controls.state().accounts).toEqual([]);
  });

  it('deletes without revoking when not asked to', async () => {
    h = await startHarness();
    const { accountId } = await connectAccount(h, 'omb_user1', 'gmail', 'work');
    expect(await h.gateway.deleteConnectedAccount(accountId, { revoke: false })).toEqual({ revoked: false });
    expect(h.sim.controls.requests().filter((r) => r.path.endsWith('/revoke'))).toEqual([]);
  });

  it('says not found for an unknown account', async () => {
    h = await startHarness();
    await expect(answered(h.gateway.deleteConnectedAccount('ca_nope', { revoke: true }))).rejects.toMatchObject({
      status: 404,
      code: 'composio_not_found',
    });
  });
});
