import { afterEach, describe, expect, it } from 'vitest';
import { answered, connectAccount, type Harness, startHarness } from './harness.js';

/** Trigger types and trigger instances, through the real SDK. */

let h: Harness;
afterEach(async () => h?.close());

describe('trigger types', () => {
  it.each([
    ['GMAIL_NEW_GMAIL_MESSAGE', 'gmail', 'poll'],
    ['SLACK_RECEIVE_MESSAGE', 'slack', 'webhook'],
    ['GITHUB_COMMIT_EVENT', 'github', 'webhook'],
  ])('describes %s', async (slug, toolkit, type) => {
    h = await startHarness();
    const triggerType = await h.gateway.getTriggerType(slug);
    expect(triggerType).toMatchObject({ slug, toolkit, type });
    expect(triggerType.configSchema).toMatchObject({ type: 'object', properties: expect.any(Object) });
  });

  it('carries the Gmail config schema', async () => {
    h = await startHarness();
    const { configSchema } = await h.gateway.getTriggerType('GMAIL_NEW_GMAIL_MESSAGE');
    expect(Object.keys((configSchema as { properties: object }).properties)).toEqual(['interval', 'labelIds', 'query', 'userId']);
  });
});

describe('trigger types of a toolkit', () => {
  it('lists them with name, description and payload schema in one request', async () => {
    h = await startHarness();
    const types = await h.gateway.listTriggerTypes('gmail');
    expect(types).toEqual([
      expect.objectContaining({
        slug: 'GMAIL_NEW_GMAIL_MESSAGE',
        toolkit: 'gmail',
        name: 'New Gmail Message Received Trigger',
        type: 'poll',
        payloadSchema: expect.objectContaining({ type: 'object', properties: expect.objectContaining({ subject: expect.any(Object) }) }),
      }),
    ]);
    expect(await h.gateway.listTriggerTypes('nosuchapp')).toEqual([]);
    expect(h.sim.controls.requests().filter((r) => r.path.startsWith('/api/v3.1/triggers_types'))).toHaveLength(2);
  });
});

describe('trigger instances', () => {
  it('upserts: the same configuration is the same trigger, another configuration a new one', async () => {
    h = await startHarness();
    const { accountId } = await connectAccount(h, 'omb_user1', 'gmail', 'work');
    const input = {
      userId: 'omb_user1',
      slug: 'GMAIL_NEW_GMAIL_MESSAGE',
      connectedAccountId: accountId,
      config: { interval: 15, query: 'from:ada' },
    };
    const first = await h.gateway.upsertTrigger(input);
    expect(first.triggerId).toMatch(/^ti_/);
    expect(await h.gateway.upsertTrigger(input)).toEqual(first);
    const other = await h.gateway.upsertTrigger({ ...input, config: { interval: 15, query: 'from:grace' } });
    expect(other.triggerId).not.toBe(first.triggerId);
    // One request per upsert: the type is not fetched again (the broker holds it already).
    expect(h.sim.controls.requests().filter((r) => r.path.startsWith('/api/v3.1/triggers_types'))).toHaveLength(0);
    expect(h.sim.controls.requests().filter((r) => r.path.endsWith('/upsert'))).toHaveLength(3);
  });

  it('lists active triggers by user, account or id, including disabled ones', async () => {
    h = await startHarness();
    const a = await connectAccount(h, 'omb_a', 'gmail', 'work');
    const b = await connectAccount(h, 'omb_b', 'slack', 'team');
    const ta = await h.gateway.upsertTrigger({
      userId: 'omb_a',
      slug: 'GMAIL_NEW_GMAIL_MESSAGE',
      connectedAccountId: a.accountId,
      config: {},
    });
    const tb = await h.gateway.upsertTrigger({
      userId: 'omb_b',
      slug: 'SLACK_RECEIVE_MESSAGE',
      connectedAccountId: b.accountId,
      config: { channel: 'C1' },
    });
    await h.gateway.setTriggerEnabled(tb.triggerId, false);

    const byUser = await h.gateway.listActiveTriggers({ userIds: ['omb_a'], limit: 10 });
    expect(byUser).toEqual({
      items: [
        {
          id: ta.triggerId,
          triggerSlug: 'GMAIL_NEW_GMAIL_MESSAGE',
          connectedAccountId: a.accountId,
          userId: 'omb_a',
          config: { interval: 1, labelIds: 'INBOX', query: '', userId: 'me' },
          enabled: true,
          updatedAt: expect.any(String),
        },
      ],
      nextCursor: null,
    });
    const byAccount = await h.gateway.listActiveTriggers({ connectedAccountIds: [b.accountId], limit: 10 });
    expect(byAccount.items).toMatchObject([{ id: tb.triggerId, enabled: false, config: { channel: 'C1' } }]);
    const byId = await h.gateway.listActiveTriggers({ triggerIds: [ta.triggerId, tb.triggerId], limit: 1 });
    expect(byId.items).toHaveLength(1);
    const second = await h.gateway.listActiveTriggers({
      triggerIds: [ta.triggerId, tb.triggerId],
      limit: 1,
      cursor: byId.nextCursor ?? '',
    });
    expect(second.nextCursor).toBeNull();
    expect([...byId.items, ...second.items].map((t) => t.id).sort()).toEqual([ta.triggerId, tb.triggerId].sort());
  });

  it('disables, re-enables and deletes', async () => {
    h = await startHarness();
    const { accountId } = await connectAccount(h, 'omb_user1', 'github', 'work');
    const { triggerId } = await h.gateway.upsertTrigger({
      userId: 'omb_user1',
      slug: 'GITHUB_COMMIT_EVENT',
      connectedAccountId: accountId,
      config: { owner: 'ada', repo: 'engine' },
    });
    await h.gateway.setTriggerEnabled(triggerId, false);
    expect((await h.gateway.listActiveTriggers({ triggerIds: [triggerId], limit: 5 })).items[0]?.enabled).toBe(false);
    await h.gateway.setTriggerEnabled(triggerId, true);
    expect((await h.gateway.listActiveTriggers({ triggerIds: [triggerId], limit: 5 })).items[0]?.enabled).toBe(true);
    await h.gateway.deleteTrigger(triggerId);
    expect((await h.gateway.listActiveTriggers({ triggerIds: [triggerId], limit: 5 })).items).toEqual([]);
    await expect(h.gateway.setTriggerEnabled(triggerId, true)).rejects.toMatchObject({ code: 'composio_not_found' });
  });

  it('refuses a trigger on a signed-out account, and an unknown trigger type', async () => {
    h = await startHarness();
    const { accountId } = await connectAccount(h, 'omb_user1', 'gmail', 'work');
    await h.sim.controls.expireAccount(accountId);
    await expect(
      answered(
        h.gateway.upsertTrigger({ userId: 'omb_user1', slug: 'GMAIL_NEW_GMAIL_MESSAGE', connectedAccountId: accountId, config: {} }),
      ),
    ).rejects.toMatchObject({ status: 422, code: 'composio_rejected' });
    await expect(
      answered(h.gateway.upsertTrigger({ userId: 'omb_user1', slug: 'GMAIL_NOPE', connectedAccountId: accountId, config: {} })),
    ).rejects.toMatchObject({ status: 404, code: 'composio_not_found' });
  });
});
