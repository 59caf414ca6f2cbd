import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AuthorizeContext, authorize as authorizeLink } from '../../src/connectors/authorize.js';
import { createLogger } from '../../src/logger.js';
import { LogCapture } from '../support/app.js';
import { type ConnectorsWorld, composioRequests, type Member, member, startWorld } from './support.js';

let w: ConnectorsWorld;
beforeAll(async () => {
  w = await startWorld();
});
afterAll(() => w.close());

const authorize = (m: Member, slug: string, body?: unknown) =>
  w.t.app.inject({
    method: 'POST',
    url: `/v1/connectors/${slug}/authorize`,
    headers: m.auth,
    ...(body === undefined ? {} : { payload: body as object }),
  });
const accountsOf = (m: Member, toolkit: string) =>
  w.h.sim.controls.state().accounts.filter((x) => x.user_id === m.userId && x.toolkit.slug === toolkit);

describe('POST /v1/connectors/:slug/authorize', () => {
  it('answers a trusted link with the account id, label and expiry', async () => {
    const m = await member(w.t.app);
    const response = await authorize(m, 'gmail', { alias: 'work' });
    expect(response.statusCode).toBe(200);
    const body = response.json();
    expect(body).toEqual({ url: expect.any(String), connectedAccountId: expect.any(String), alias: 'work', expiresAt: expect.any(String) });
    expect(new URL(body.url).origin).toBe(w.h.sim.origin);
    expect(accountsOf(m, 'gmail')).toMatchObject([{ id: body.connectedAccountId, alias: 'work', status: 'INITIATED' }]);
  });

  it('sends a first connection without a label to Composio with no alias at all', async () => {
    const m = await member(w.t.app);
    const response = await authorize(m, 'slack');
    expect(response.statusCode).toBe(200);
    const body = response.json();
    expect(body.alias).toBeNull();
    // What Composio was asked for: no alias in the link request, so the account has no name.
    const links = w.h.sim.controls.state().links.filter((l) => l.userId === m.userId && l.toolkit === 'slack');
    expect(links).toHaveLength(1);
    expect(links[0]!.alias).toBeNull();
    expect(accountsOf(m, 'slack')).toMatchObject([{ id: body.connectedAccountId, alias: null, status: 'INITIATED' }]);
  });

  it('gives an unlabelled retry a unique omb-retry label while accounts exist and none works', async () => {
    const m = await member(w.t.app);
    const first = (await authorize(m, 'slack')).json();
    const second = (await authorize(m, 'slack')).json();
    const third = (await authorize(m, 'slack')).json();
    expect(first.alias).toBeNull();
    expect(second.alias).toMatch(/^omb-retry-[0-9a-f]{12}$/);
    expect(third.alias).toMatch(/^omb-retry-[0-9a-f]{12}$/);
    expect(third.alias).not.toBe(second.alias);
    expect(accountsOf(m, 'slack')).toHaveLength(3);
  });

  it('labels an unlabelled retry beside an expired account and leaves that account alone', async () => {
    const m = await member(w.t.app);
    const stale = w.h.sim.controls.createAccount({ userId: m.userId, toolkit: 'gmail', alias: 'home', status: 'EXPIRED' });
    const response = await authorize(m, 'gmail');
    expect(response.statusCode).toBe(200);
    expect(response.json().alias).toMatch(/^omb-retry-[0-9a-f]{12}$/);
    expect(accountsOf(m, 'gmail').map((a) => a.id)).toContain(stale.id);
  });

  it('requires a label beside a working account', async () => {
    const m = await member(w.t.app);
    w.h.sim.controls.createAccount({ userId: m.userId, toolkit: 'gmail', alias: 'work', status: 'ACTIVE' });
    const response = await authorize(m, 'gmail');
    expect(response.statusCode).toBe(400);
    expect(response.json().code).toBe('alias_required');
    expect(accountsOf(m, 'gmail')).toHaveLength(1);
  });

  it('refuses a label a working account holds, whatever its case', async () => {
    const m = await member(w.t.app);
    w.h.sim.controls.createAccount({ userId: m.userId, toolkit: 'gmail', alias: 'work', status: 'ACTIVE' });
    const response = await authorize(m, 'gmail', { alias: '  WORK ' });
    expect(response.statusCode).toBe(409);
    expect(response.json().code).toBe('alias_taken');
    expect(accountsOf(m, 'gmail')).toHaveLength(1);
  });

  it.each(['INITIATED', 'FAILED', 'EXPIRED'] as const)('frees a label held only by a %s account, then reuses it', async (status) => {
    const m = await member(w.t.app);
    const stale = w.h.sim.controls.createAccount({ userId: m.userId, toolkit: 'gmail', alias: 'home', status });
    const response = await authorize(m, 'gmail', { alias: 'home' });
    expect(response.statusCode).toBe(200);
    const accounts = accountsOf(m, 'gmail');
    expect(accounts.map((x) => x.id)).toEqual([response.json().connectedAccountId]);
    expect(accounts[0]!.alias).toBe('home');
    expect(accounts.some((x) => x.id === stale.id)).toBe(false);
  });

  it('allows five usable accounts and refuses a sixth, without counting the one being replaced', async () => {
    const m = await member(w.t.app);
    for (const alias of ['a1', 'a2', 'a3', 'a4'])
      w.h.sim.controls.createAccount({ userId: m.userId, toolkit: 'gmail', alias, status: 'ACTIVE' });
    w.h.sim.controls.createAccount({ userId: m.userId, toolkit: 'gmail', alias: 'a5', status: 'INITIATED' });
    w.h.sim.controls.createAccount({ userId: m.userId, toolkit: 'gmail', alias: 'gone', status: 'EXPIRED' });

    const sixth = await authorize(m, 'gmail', { alias: 'a6' });
    expect(sixth.statusCode).toBe(409);
    expect(sixth.json().code).toBe('too_many_accounts');

    // Replacing the abandoned a5 sign-in keeps the count at five.
    const replace = await authorize(m, 'gmail', { alias: 'a5' });
    expect(replace.statusCode).toBe(200);
    expect(accountsOf(m, 'gmail').filter((x) => x.alias === 'a5')).toHaveLength(1);
  });

  it('explains in one line that an app with no Composio-managed sign-in cannot be connected', async () => {
    const m = await member(w.t.app);
    const response = await authorize(m, 'xero', { alias: 'books' });
    expect(response.statusCode).toBe(422);
    expect(response.json()).toEqual({
      code: 'auth_config_required',
      error: expect.stringMatching(/cannot connect xero.*own Composio project key in Settings → API keys/),
    });
    expect(response.json().error).not.toContain('\n');
  });

  it.each([
    ['a label too long', 'gmail', { alias: 'x'.repeat(65) }, 'body.alias'],
    ['an empty label', 'gmail', { alias: '   ' }, 'body.alias'],
    ['a label with control characters', 'gmail', { alias: 'a\u0000b' }, 'body.alias'],
    ['a label of the wrong type', 'gmail', { alias: 7 }, 'body.alias'],
    ['an unknown field', 'gmail', { alias: 'w', scope: 'all' }, 'body'],
    ['a bad slug', 'Gmail!', { alias: 'w' }, 'params.slug'],
  ])('refuses %s with 400 and makes nothing', async (_name, slug, body, field) => {
    const m = await member(w.t.app);
    const before = w.h.sim.controls.requests().length;
    const response = await authorize(m, encodeURIComponent(slug), body);
    expect(response.statusCode).toBe(400);
    expect(response.json().error.startsWith(field)).toBe(true);
    expect(composioRequests(w.h, before)).toEqual([]);
  });

  it('refuses malformed JSON with 400', async () => {
    const m = await member(w.t.app);
    const response = await w.t.app.inject({
      method: 'POST',
      url: '/v1/connectors/gmail/authorize',
      headers: { ...m.auth, 'content-type': 'application/json' },
      payload: '{"alias":',
    });
    expect(response.statusCode).toBe(400);
    expect(response.json().code).toBe('invalid_json');
  });
});

describe('authorize and the sign-in note', () => {
  /** The note and the log, kept; `failing` makes every note throw. */
  function recorder(failing = false) {
    const notes: [string, string, string][] = [];
    const logs = new LogCapture();
    const ctx: AuthorizeContext = {
      db: w.t.database.db,
      composio: w.h.gateway,
      clock: w.t.clock,
      noteSignInLink: async (installationId, toolkit, alias) => {
        if (failing) throw new Error('the note was refused');
        notes.push([installationId, toolkit, alias]);
      },
      log: createLogger('info', logs),
    };
    const messages = () => logs.lines.map((l) => JSON.parse(l) as { level: number; msg: string });
    return { ctx, notes, messages };
  }
  const installationOf = (m: Member) => ({ id: m.installationId, composioUserId: m.userId });

  it('notes each link made under its own label, and under none for a first connection or a retry label', async () => {
    const m = await member(w.t.app);
    const { ctx, notes } = recorder();
    await authorizeLink(ctx, installationOf(m), 'gmail', 'Work');
    const first = await authorizeLink(ctx, installationOf(m), 'slack', undefined);
    const retry = await authorizeLink(ctx, installationOf(m), 'slack', undefined);
    expect(first.alias).toBeNull();
    expect(retry.alias).toMatch(/^omb-retry-/);
    expect(notes).toEqual([
      [m.installationId, 'gmail', 'Work'],
      [m.installationId, 'slack', ''],
      [m.installationId, 'slack', ''],
    ]);
  });

  it('notes nothing for a link it refuses', async () => {
    const m = await member(w.t.app);
    w.h.sim.controls.createAccount({ userId: m.userId, toolkit: 'gmail', alias: 'work', status: 'ACTIVE' });
    const { ctx, notes } = recorder();
    await expect(authorizeLink(ctx, installationOf(m), 'gmail', 'work')).rejects.toMatchObject({ code: 'alias_taken' });
    expect(notes).toEqual([]);
  });

  it('answers the link when the note cannot be written, and logs why', async () => {
    const m = await member(w.t.app);
    const { ctx, messages } = recorder(true);
    const link = await authorizeLink(ctx, installationOf(m), 'gmail', 'home');
    expect(link).toMatchObject({ alias: 'home', connectedAccountId: expect.any(String) });
    expect(accountsOf(m, 'gmail')).toMatchObject([{ id: link.connectedAccountId, alias: 'home' }]);
    expect(messages()).toMatchObject([
      { level: 30, msg: 'sign-in link made', toolkit: 'gmail', connectedAccountId: link.connectedAccountId },
      { level: 40, msg: 'could not note the sign-in link for triggers waiting for a reconnect', err: { message: 'the note was refused' } },
    ]);
  });
});
