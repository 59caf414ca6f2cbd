import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ConnectorsWorld, composioRequests, type Member, member, startWorld } from './support.js';

let w: ConnectorsWorld;
let a: Member;
let b: Member;
beforeAll(async () => {
  w = await startWorld();
  a = await member(w.t.app);
  b = await member(w.t.app);
});
afterAll(() => w.close());

const exists = (id: string) => w.h.sim.controls.state().accounts.some((x) => x.id === id);
const remove = (m: Member, url: string) => w.t.app.inject({ method: 'DELETE', url, headers: m.auth });

describe('DELETE /v1/connectors/:slug/accounts/:id', () => {
  it('revokes and deletes the installation’s own account', async () => {
    const own = w.h.sim.controls.createAccount({ userId: a.userId, toolkit: 'gmail', alias: 'work', status: 'ACTIVE' });
    const response = await remove(a, `/v1/connectors/gmail/accounts/${own.id}`);
    expect(response.statusCode).toBe(200);
    expect(response.json()).toEqual({ removed: 1 });
    expect(exists(own.id)).toBe(false);
  });

  it('removes nothing for another installation’s account id, and revokes nothing', async () => {
    const theirs = w.h.sim.controls.createAccount({ userId: b.userId, toolkit: 'gmail', alias: 'work', status: 'ACTIVE' });
    const before = w.h.sim.controls.requests().length;
    const response = await remove(a, `/v1/connectors/gmail/accounts/${theirs.id}`);
    expect(response.json()).toEqual({ removed: 0 });
    expect(exists(theirs.id)).toBe(true);
    const calls = composioRequests(w.h, before);
    expect(calls.some((c) => c.startsWith('DELETE') || c.endsWith('/revoke'))).toBe(false);
  });

  it('removes nothing for an unknown id or an account of another app', async () => {
    const slack = w.h.sim.controls.createAccount({ userId: a.userId, toolkit: 'slack', alias: 'team', status: 'ACTIVE' });
    expect((await remove(a, `/v1/connectors/gmail/accounts/${slack.id}`)).json()).toEqual({ removed: 0 });
    expect(exists(slack.id)).toBe(true);
    expect((await remove(a, '/v1/connectors/gmail/accounts/ca_doesnotexist')).json()).toEqual({ removed: 0 });
  });

  it.each(['ca%20x', '-ca', 'ca.x', 'x'.repeat(129)])('refuses the malformed account id %s with 400', async (id) => {
    const response = await remove(a, `/v1/connectors/gmail/accounts/${id}`);
    expect(response.statusCode).toBe(400);
    expect(response.json().error).toMatch(/^params\.accountId/);
  });
});

describe('DELETE /v1/connectors/:slug', () => {
  it('removes the account the Session has selected, then nothing', async () => {
    const m = await member(w.t.app);
    const selected = w.h.sim.controls.createAccount({ userId: m.userId, toolkit: 'github', alias: 'me', status: 'ACTIVE' });
    expect((await remove(m, '/v1/connectors/github')).json()).toEqual({ removed: 1 });
    expect(exists(selected.id)).toBe(false);
    expect((await remove(m, '/v1/connectors/github')).json()).toEqual({ removed: 0 });
  });

  it('never removes another installation’s account', async () => {
    const theirs = w.h.sim.controls.createAccount({ userId: b.userId, toolkit: 'googlecalendar', alias: 'cal', status: 'ACTIVE' });
    expect((await remove(a, '/v1/connectors/googlecalendar')).json()).toEqual({ removed: 0 });
    expect(exists(theirs.id)).toBe(true);
  });
});

describe('DELETE /v1/me', () => {
  it('revokes the installation’s connected accounts and no one else’s', async () => {
    const leaving = await member(w.t.app);
    const mine = w.h.sim.controls.createAccount({ userId: leaving.userId, toolkit: 'gmail', alias: 'x', status: 'ACTIVE' });
    const other = w.h.sim.controls.createAccount({ userId: b.userId, toolkit: 'slack', alias: 'y', status: 'ACTIVE' });
    expect((await w.t.app.inject({ method: 'DELETE', url: '/v1/me', headers: leaving.auth })).statusCode).toBe(204);
    expect(exists(mine.id)).toBe(false);
    expect(exists(other.id)).toBe(true);
  });
});
