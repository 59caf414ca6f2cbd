import { afterEach, describe, expect, it } from 'vitest';
import { type Simulator, startSimulator } from '../../src/sim/index.js';

/**
 * Connected accounts as strict as Composio: no deprecated `user_id` in list and get answers
 * (a reading keeps it), the `user_ids` and `connected_account_ids` filters honoured, and a
 * sign-in abandoned for ten minutes of the simulator's clock no longer under way.
 */

let sim: Simulator;
afterEach(async () => sim?.close());

async function get(path: string): Promise<{ status: number; json: any }> {
  const response = await fetch(`${sim.origin}${path}`, { headers: { 'x-api-key': sim.apiKey } });
  return { status: response.status, json: await response.json() };
}

describe('connected accounts at the simulator', () => {
  it('answers list and get without user_id, by default', async () => {
    sim = await startSimulator({ apiKey: 'k', logger: false });
    const account = sim.controls.createAccount({ userId: 'u1', toolkit: 'gmail', alias: 'work', status: 'ACTIVE' });
    const list = await get('/api/v3.1/connected_accounts?user_ids=u1');
    expect(list.json.items).toHaveLength(1);
    expect(list.json.items[0]).not.toHaveProperty('user_id');
    const one = await get(`/api/v3.1/connected_accounts/${account.id}`);
    expect(one.json).toMatchObject({ id: account.id, alias: 'work', status: 'ACTIVE' });
    expect(one.json).not.toHaveProperty('user_id');
    // The simulator's own view still names the user.
    expect(sim.controls.state().accounts[0]).toMatchObject({ id: account.id, user_id: 'u1' });
  });

  it('keeps user_id under the kinder reading', async () => {
    sim = await startSimulator({ apiKey: 'k', logger: false, readings: { accountUserIds: true } });
    const account = sim.controls.createAccount({ userId: 'u1', toolkit: 'gmail', alias: 'work', status: 'ACTIVE' });
    expect((await get('/api/v3.1/connected_accounts?user_ids=u1')).json.items[0]).toMatchObject({ user_id: 'u1' });
    expect((await get(`/api/v3.1/connected_accounts/${account.id}`)).json).toMatchObject({ user_id: 'u1' });
  });

  it('lists only the accounts of the users and ids asked for', async () => {
    sim = await startSimulator({ apiKey: 'k', logger: false });
    const mine = sim.controls.createAccount({ userId: 'u1', toolkit: 'gmail', alias: 'a', status: 'ACTIVE' });
    const second = sim.controls.createAccount({ userId: 'u1', toolkit: 'slack', alias: 'b', status: 'ACTIVE' });
    const theirs = sim.controls.createAccount({ userId: 'u2', toolkit: 'gmail', alias: 'a', status: 'ACTIVE' });
    const ids = async (query: string) =>
      ((await get(`/api/v3.1/connected_accounts?${query}`)).json.items as { id: string }[]).map((x) => x.id);
    expect((await ids('user_ids=u1')).sort()).toEqual([mine.id, second.id].sort());
    expect(await ids(`user_ids=u1&connected_account_ids=${mine.id}`)).toEqual([mine.id]);
    expect(await ids(`user_ids=u1&connected_account_ids=${theirs.id}`)).toEqual([]);
    expect((await ids('user_ids=u1,u2')).sort()).toEqual([mine.id, second.id, theirs.id].sort());
  });

  it.each([
    ['EXPIRED', {}],
    ['FAILED', { abandonedSignIn: 'FAILED' as const }],
    ['INITIATED', { abandonedSignIn: 'INITIATED' as const }],
  ])('marks a sign-in unfinished after ten minutes of its clock %s, with Composio’s reason', async (status, readings) => {
    sim = await startSimulator({ apiKey: 'k', logger: false, readings });
    const pending = sim.controls.createAccount({ userId: 'u1', toolkit: 'gmail', alias: 'a' });
    const active = sim.controls.createAccount({ userId: 'u1', toolkit: 'slack', alias: 'b', status: 'ACTIVE' });
    sim.controls.advanceClock(10 * 60_000 - 1_000);
    expect((await get(`/api/v3.1/connected_accounts/${pending.id}`)).json).toMatchObject({ status: 'INITIATED', status_reason: null });
    sim.controls.advanceClock(1_000);
    expect((await get(`/api/v3.1/connected_accounts/${pending.id}`)).json).toMatchObject({
      status,
      status_reason: 'Connection initiation did not complete within 10 minutes',
    });
    expect((await get(`/api/v3.1/connected_accounts/${active.id}`)).json).toMatchObject({ status: 'ACTIVE', status_reason: null });
    // Not under way any more: the list filtered by INITIATED no longer has it (unless Composio keeps the status).
    const initiated = (await get('/api/v3.1/connected_accounts?user_ids=u1&statuses=INITIATED')).json.items;
    expect(initiated).toHaveLength(status === 'INITIATED' ? 1 : 0);
  });
});
