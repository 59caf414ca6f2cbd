import { describe, expect, it } from 'vitest';
import {
  callsSince,
  composioTrigger,
  createTrigger,
  githubCommitBody,
  gmailBody,
  installationWithAccount,
  storedTrigger,
  storedTriggerCount,
  useTriggersWorld,
} from './support.js';

/** `POST /v1/triggers` against real Postgres and the simulator through the real SDK. */

const world = useTriggersWorld();

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe('creating a Gmail trigger', () => {
  it('creates it on Composio with the Gmail query and a 15-minute interval, then stores it', async () => {
    const a = await installationWithAccount(world);
    const filter = { from: 'boss@example.com', subject: 'Q3 "final" report', label: 'Work/Clients', words: 'invoice OR overdue' };
    const response = await createTrigger(world, a, gmailBody(a.accountId, { filter, config: { labelIds: 'INBOX' } }));

    expect(response.statusCode).toBe(201);
    expect(response.headers['cache-control']).toBe('no-store');
    const trigger = response.json();
    expect(trigger).toEqual({
      id: expect.stringMatching(UUID),
      automationId: 'auto_mail',
      toolkit: 'gmail',
      triggerSlug: 'GMAIL_NEW_GMAIL_MESSAGE',
      connectedAccountId: a.accountId,
      filter,
      config: { labelIds: 'INBOX' },
      enabled: true,
      status: 'active',
      today: { kept: 0, skipped: 0, skippedReason: null },
      createdAt: expect.any(String),
    });

    const row = await storedTrigger(world, trigger.id);
    expect(row).toMatchObject({ installationId: a.installationId, composioTriggerId: expect.stringMatching(/^ti_/) });
    expect(composioTrigger(world, row!.composioTriggerId)).toMatchObject({
      user_id: a.composioUserId,
      connected_account_id: a.accountId,
      trigger_name: 'GMAIL_NEW_GMAIL_MESSAGE',
      disabled_at: null,
      trigger_config: {
        interval: 15,
        labelIds: 'INBOX',
        userId: 'me',
        query: 'from:"boss@example.com" subject:"Q3 final report" label:Work-Clients "invoice" "OR" "overdue"',
      },
    });
  });

  it('sends no query for an empty filter, and still polls every 15 minutes', async () => {
    const a = await installationWithAccount(world);
    const trigger = (await createTrigger(world, a, gmailBody(a.accountId))).json();
    const row = await storedTrigger(world, trigger.id);
    expect(composioTrigger(world, row!.composioTriggerId)?.trigger_config).toEqual({
      interval: 15,
      labelIds: 'INBOX',
      query: '',
      userId: 'me',
    });
  });

  it.each([
    [1, 15],
    [14.5, 15],
    [-3, 15],
    [15, 15],
    [60, 60],
  ])('raises config.interval %d to at least 15 (sends %d) and answers the config as sent', async (asked, sent) => {
    const a = await installationWithAccount(world);
    const response = await createTrigger(world, a, gmailBody(a.accountId, { config: { interval: asked } }));
    expect(response.statusCode).toBe(201);
    expect(response.json().config).toEqual({ interval: asked });
    const row = await storedTrigger(world, response.json().id);
    expect(composioTrigger(world, row!.composioTriggerId)?.trigger_config).toMatchObject({ interval: sent });
  });

  it('refuses an interval that is not a number, creating nothing', async () => {
    const a = await installationWithAccount(world);
    const before = world.h.calls.length;
    const response = await createTrigger(world, a, gmailBody(a.accountId, { config: { interval: '5' } }));
    expect(response.statusCode).toBe(400);
    expect(response.json()).toEqual({ error: 'body.config.interval: must be a number of minutes', code: 'invalid_request' });
    expect(callsSince(world, before)).not.toContain('triggers.upsert');
  });

  it('creates a paused trigger: created, then disabled on Composio', async () => {
    const a = await installationWithAccount(world);
    const response = await createTrigger(world, a, gmailBody(a.accountId, { enabled: false }));
    expect(response.statusCode).toBe(201);
    expect(response.json()).toMatchObject({ enabled: false, status: 'paused' });
    const row = await storedTrigger(world, response.json().id);
    expect(composioTrigger(world, row!.composioTriggerId)?.disabled_at).toEqual(expect.any(String));
  });
});

describe('other apps', () => {
  it('passes config through, adds no interval to webhook triggers, and keeps the filter for matching here', async () => {
    const a = await installationWithAccount(world, 'github');
    const body = {
      automationId: 'auto_commits',
      toolkit: 'github',
      triggerSlug: 'GITHUB_COMMIT_EVENT',
      connectedAccountId: a.accountId,
      filter: { author: 'ada', 'commit.message': 'fix' },
      config: { owner: 'ada', repo: 'engine' },
    };
    const response = await createTrigger(world, a, body);
    expect(response.statusCode).toBe(201);
    expect(response.json()).toMatchObject({ filter: body.filter, config: body.config, status: 'active' });
    const row = await storedTrigger(world, response.json().id);
    expect(composioTrigger(world, row!.composioTriggerId)?.trigger_config).toEqual({ owner: 'ada', repo: 'engine' });
  });

  it('passes on what Composio refuses about the configuration, storing nothing', async () => {
    const a = await installationWithAccount(world, 'github');
    const before = await storedTriggerCount(world);
    // The schema's rules pass (both fields present, strings); Composio refuses an empty owner.
    const response = await createTrigger(
      world,
      a,
      githubCommitBody(a.accountId, { automationId: 'auto_bad', config: { owner: '', repo: 'engine' } }),
    );
    expect(response.statusCode).toBe(422);
    expect(response.json()).toMatchObject({ code: 'composio_rejected', error: expect.stringContaining('owner') });
    expect(await storedTriggerCount(world)).toBe(before);
  });
});

describe('idempotency on automationId', () => {
  it('answers the same body again with the stored trigger (200) without calling Composio', async () => {
    const a = await installationWithAccount(world);
    const body = gmailBody(a.accountId, { filter: { from: 'a@example.com', words: 'x y' }, config: { labelIds: 'INBOX', interval: 30 } });
    const first = await createTrigger(world, a, body);
    expect(first.statusCode).toBe(201);
    const triggersOnComposio = world.h.sim.controls.state().triggers.length;

    const before = world.h.calls.length;
    // Keys in another order are the same body.
    const again = await createTrigger(world, a, {
      config: { interval: 30, labelIds: 'INBOX' },
      filter: { words: 'x y', from: 'a@example.com' },
      ...body,
    });
    expect(again.statusCode).toBe(200);
    expect(again.json()).toEqual(first.json());
    expect(callsSince(world, before)).toEqual([]);
    expect(world.h.sim.controls.state().triggers).toHaveLength(triggersOnComposio);
  });

  it.each([
    ['filter', { filter: { from: 'someone-else@example.com' } }],
    ['config', { config: { labelIds: 'STARRED' } }],
    ['enabled', { enabled: false }],
    ['trigger type', { triggerSlug: 'GMAIL_SOMETHING_ELSE' }],
  ])('refuses another %s for the same automation (409) without calling Composio', async (_what, change) => {
    const a = await installationWithAccount(world);
    expect((await createTrigger(world, a, gmailBody(a.accountId))).statusCode).toBe(201);
    const before = world.h.calls.length;
    const response = await createTrigger(world, a, gmailBody(a.accountId, change));
    expect(response.statusCode).toBe(409);
    expect(response.json()).toEqual({
      error: expect.stringContaining('auto_mail already has a different trigger'),
      code: 'automation_conflict',
    });
    expect(callsSince(world, before)).toEqual([]);
  });

  it('tells the client to recreate a trigger whose account expired', async () => {
    const a = await installationWithAccount(world);
    const created = await createTrigger(world, a, gmailBody(a.accountId));
    await world.t.database.sql`update triggers set needs_reconnect_at = now() where id = ${created.json().id}`;
    const response = await createTrigger(world, a, gmailBody('ca_reconnected'));
    expect(response.statusCode).toBe(409);
    expect(response.json()).toEqual({
      error: expect.stringContaining('lost its account; reconnect the account under the same label'),
      code: 'automation_conflict',
    });
  });

  it('keeps automation ids per installation: another installation may use the same one', async () => {
    const a = await installationWithAccount(world);
    const b = await installationWithAccount(world);
    expect((await createTrigger(world, a, gmailBody(a.accountId))).statusCode).toBe(201);
    expect((await createTrigger(world, b, gmailBody(b.accountId))).statusCode).toBe(201);
  });

  it('settles two identical requests racing: one trigger on Composio, one row, both answered with it', async () => {
    const a = await installationWithAccount(world);
    const body = gmailBody(a.accountId, { filter: { subject: 'race' } });
    const answers = await Promise.all([createTrigger(world, a, body), createTrigger(world, a, body), createTrigger(world, a, body)]);
    expect(answers.map((r) => r.statusCode).sort()).toEqual([200, 200, 201]);
    const ids = new Set(answers.map((r) => r.json().id));
    expect(ids.size).toBe(1);
    const onComposio = world.h.sim.controls.state().triggers.filter((t) => t.connected_account_id === a.accountId);
    expect(onComposio).toHaveLength(1);
    expect(onComposio[0]?.disabled_at).toBeNull();
  });

  it('settles different bodies racing for one automation: the loser’s Composio trigger is deleted', async () => {
    const a = await installationWithAccount(world);
    const answers = await Promise.all([
      createTrigger(world, a, gmailBody(a.accountId, { filter: { subject: 'one' } })),
      createTrigger(world, a, gmailBody(a.accountId, { filter: { subject: 'two' } })),
    ]);
    expect(answers.map((r) => r.statusCode).sort()).toEqual([201, 409]);
    const winner = answers.find((r) => r.statusCode === 201)!.json();
    const row = await storedTrigger(world, winner.id);
    const onComposio = world.h.sim.controls.state().triggers.filter((t) => t.connected_account_id === a.accountId);
    expect(onComposio.map((t) => t.id)).toEqual([row!.composioTriggerId]);
  });
});

describe('races decided by the unique index', () => {
  // Inserts that wait a moment let every request pass the early checks before any row exists.
  async function withSlowInserts<T>(run: () => Promise<T>): Promise<T> {
    const { sql } = world.t.database;
    await sql`create function omb_test_slow() returns trigger language plpgsql as $$ begin perform pg_sleep(0.3); return new; end $$`;
    await sql`create trigger omb_test_slow before insert on triggers for each row execute function omb_test_slow()`;
    try {
      return await run();
    } finally {
      await sql`drop trigger omb_test_slow on triggers`;
      await sql`drop function omb_test_slow()`;
    }
  }

  it('answers the loser of identical requests with the winner’s trigger and keeps the shared Composio trigger', async () => {
    const a = await installationWithAccount(world);
    const body = gmailBody(a.accountId, { enabled: false, filter: { subject: 'slow race' } });
    const answers = await withSlowInserts(() => Promise.all([createTrigger(world, a, body), createTrigger(world, a, body)]));
    expect(answers.map((r) => r.statusCode).sort()).toEqual([200, 201]);
    expect(answers[0]!.json()).toEqual(answers[1]!.json());
    const onComposio = world.h.sim.controls.state().triggers.filter((t) => t.connected_account_id === a.accountId);
    expect(onComposio).toHaveLength(1);
    expect(onComposio[0]?.disabled_at).toEqual(expect.any(String));
  });

  it('deletes the loser’s own Composio trigger when the bodies differ', async () => {
    const a = await installationWithAccount(world);
    const answers = await withSlowInserts(() =>
      Promise.all([
        createTrigger(world, a, gmailBody(a.accountId, { filter: { subject: 'slow one' } })),
        createTrigger(world, a, gmailBody(a.accountId, { filter: { subject: 'slow two' } })),
      ]),
    );
    expect(answers.map((r) => r.statusCode).sort()).toEqual([201, 409]);
    const row = await storedTrigger(world, answers.find((r) => r.statusCode === 201)!.json().id);
    const onComposio = world.h.sim.controls.state().triggers.filter((t) => t.connected_account_id === a.accountId);
    expect(onComposio.map((t) => t.id)).toEqual([row!.composioTriggerId]);
  });

  it('refuses a second automation racing for the same Composio trigger without deleting it', async () => {
    const a = await installationWithAccount(world);
    const answers = await withSlowInserts(() =>
      Promise.all([
        createTrigger(world, a, gmailBody(a.accountId, { automationId: 'left', filter: { subject: 'same' } })),
        createTrigger(world, a, gmailBody(a.accountId, { automationId: 'right', filter: { subject: 'same' } })),
      ]),
    );
    expect(answers.map((r) => r.statusCode).sort()).toEqual([201, 409]);
    expect(answers.find((r) => r.statusCode === 409)!.json().code).toBe('trigger_duplicate');
    const row = await storedTrigger(world, answers.find((r) => r.statusCode === 201)!.json().id);
    expect(composioTrigger(world, row!.composioTriggerId)).toMatchObject({ disabled_at: null });
  });
});

describe('a second automation with exactly the same trigger', () => {
  it('is refused (409) and leaves the first one as it was, also when it is paused', async () => {
    const a = await installationWithAccount(world);
    const first = await createTrigger(
      world,
      a,
      gmailBody(a.accountId, { automationId: 'first', enabled: false, filter: { from: 'x@example.com' } }),
    );
    expect(first.statusCode).toBe(201);
    const row = await storedTrigger(world, first.json().id);

    const second = await createTrigger(world, a, gmailBody(a.accountId, { automationId: 'second', filter: { from: 'x@example.com' } }));
    expect(second.statusCode).toBe(409);
    expect(second.json()).toEqual({
      error: expect.stringContaining('automation first already has this trigger'),
      code: 'trigger_duplicate',
    });
    // Composio's upsert re-enabled the shared trigger; the broker paused it again.
    expect(composioTrigger(world, row!.composioTriggerId)?.disabled_at).toEqual(expect.any(String));
    expect(await storedTrigger(world, first.json().id)).toMatchObject({ enabled: false });
  });

  it('is the same config on another app, whatever the filter: the broker applies that filter, so it makes no other trigger', async () => {
    const a = await installationWithAccount(world, 'github');
    const first = await createTrigger(world, a, githubCommitBody(a.accountId, { automationId: 'fixes', filter: { message: 'fix' } }));
    expect(first.statusCode).toBe(201);
    const second = await createTrigger(world, a, githubCommitBody(a.accountId, { automationId: 'crashes', filter: { message: 'crash' } }));
    expect(second.statusCode).toBe(409);
    const { error, code } = second.json();
    expect(code).toBe('trigger_duplicate');
    // It says what would make another trigger (another config), not a filter that would not.
    expect(error).toContain('automation fixes already has this trigger on this account with the same config');
    expect(error).toContain('change the config, or reuse that automation');
    expect(error).not.toContain('change the filter');
    expect(await storedTrigger(world, first.json().id)).toMatchObject({ automationId: 'fixes', filter: { message: 'fix' } });
  });
});

describe('the connected account', () => {
  it('must be this installation’s: another installation’s account is 404 and nothing is created', async () => {
    const a = await installationWithAccount(world);
    const b = await installationWithAccount(world);
    const before = world.h.calls.length;
    const triggersOnComposio = world.h.sim.controls.state().triggers.length;
    const stored = await storedTriggerCount(world);

    const response = await createTrigger(world, a, gmailBody(b.accountId));
    expect(response.statusCode).toBe(404);
    expect(response.json()).toEqual({
      error: `connected account ${b.accountId} is not one of this installation's accounts`,
      code: 'connected_account_not_found',
    });
    expect(callsSince(world, before)).not.toContain('triggers.upsert');
    expect(world.h.sim.controls.state().triggers).toHaveLength(triggersOnComposio);
    expect(await storedTriggerCount(world)).toBe(stored);
  });

  it('answers an unknown account exactly like another installation’s', async () => {
    const a = await installationWithAccount(world);
    const b = await installationWithAccount(world);
    const foreign = await createTrigger(world, a, gmailBody(b.accountId));
    const unknown = await createTrigger(world, a, gmailBody('ca_doesnotexist'));
    expect(unknown.statusCode).toBe(foreign.statusCode);
    expect(unknown.json()).toEqual({ ...foreign.json(), error: foreign.json().error.replace(b.accountId, 'ca_doesnotexist') });
  });

  it('must be of the trigger’s app', async () => {
    const a = await installationWithAccount(world, 'slack');
    const response = await createTrigger(world, a, gmailBody(a.accountId));
    expect(response.statusCode).toBe(400);
    expect(response.json()).toEqual({
      error: 'body.connectedAccountId: the account is a slack account, not gmail',
      code: 'toolkit_mismatch',
    });
  });

  it('must be signed in', async () => {
    const a = await installationWithAccount(world);
    await world.h.sim.controls.expireAccount(a.accountId);
    const response = await createTrigger(world, a, gmailBody(a.accountId));
    expect(response.statusCode).toBe(409);
    expect(response.json()).toMatchObject({ code: 'reconnect_required', error: expect.stringContaining('COMPOSIO_MANAGE_CONNECTIONS') });
  });
});

describe('the trigger type', () => {
  it('is 404 when Composio has no such type', async () => {
    const a = await installationWithAccount(world);
    const response = await createTrigger(world, a, gmailBody(a.accountId, { triggerSlug: 'GMAIL_NO_SUCH_TRIGGER' }));
    expect(response.statusCode).toBe(404);
    expect(response.json()).toEqual({ error: 'there is no trigger type GMAIL_NO_SUCH_TRIGGER', code: 'trigger_type_not_found' });
  });

  it('must belong to the toolkit', async () => {
    const a = await installationWithAccount(world);
    const response = await createTrigger(world, a, gmailBody(a.accountId, { triggerSlug: 'SLACK_RECEIVE_MESSAGE' }));
    expect(response.statusCode).toBe(400);
    expect(response.json()).toEqual({
      error: 'body.triggerSlug: SLACK_RECEIVE_MESSAGE is a slack trigger, not gmail',
      code: 'toolkit_mismatch',
    });
  });
});

describe('failures leave no orphans', () => {
  it('deletes the Composio trigger again when storing it fails', async () => {
    const a = await installationWithAccount(world);
    const { sql } = world.t.database;
    await sql`create function omb_test_refuse() returns trigger language plpgsql as $$ begin raise exception 'refused by test'; end $$`;
    await sql`create trigger omb_test_refuse before insert on triggers for each row execute function omb_test_refuse()`;
    try {
      const response = await createTrigger(world, a, gmailBody(a.accountId, { filter: { subject: 'orphan?' } }));
      expect(response.statusCode).toBe(500);
    } finally {
      await sql`drop trigger omb_test_refuse on triggers`;
      await sql`drop function omb_test_refuse()`;
    }
    expect(world.h.sim.controls.state().triggers.filter((t) => t.connected_account_id === a.accountId)).toEqual([]);
  });

  it('deletes it again when pausing a new trigger fails, and stores nothing', async () => {
    const a = await installationWithAccount(world);
    const stored = await storedTriggerCount(world);
    world.h.sim.controls.injectFault({ method: 'PATCH', path: '/api/v3.1/trigger_instances/manage/', status: 500 });
    const response = await createTrigger(world, a, gmailBody(a.accountId, { enabled: false }));
    expect(response.statusCode).toBe(502);
    expect(response.json().code).toBe('upstream_unavailable');
    expect(world.h.sim.controls.state().triggers.filter((t) => t.connected_account_id === a.accountId)).toEqual([]);
    expect(await storedTriggerCount(world)).toBe(stored);
  });

  it('stores nothing when Composio fails to create it', async () => {
    const a = await installationWithAccount(world);
    const stored = await storedTriggerCount(world);
    world.h.sim.controls.injectFault({ method: 'POST', path: '/api/v3.1/trigger_instances/', status: 503 });
    const response = await createTrigger(world, a, gmailBody(a.accountId));
    expect(response.statusCode).toBe(502);
    expect(await storedTriggerCount(world)).toBe(stored);
    // Nothing half-made blocks a retry.
    expect((await createTrigger(world, a, gmailBody(a.accountId))).statusCode).toBe(201);
  });
});
