import { createHash, randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { utcDay } from '../../src/clock.js';
import { dailyUsage, triggers } from '../../src/db/schema.js';
import { noteOperatorKeys, removeExpiredAudit } from '../../src/operators/audit.js';
import { startSimulator } from '../../src/sim/index.js';
import { buildTestApp, register, type TestApp } from '../support/app.js';
import { type AuditRow, adminClaims, grantClaims, operatorKey, runCli, signClaims, type TestOperatorKey, trusting } from './support.js';

let t: TestApp;
let key: TestOperatorKey;

beforeAll(async () => {
  key = await operatorKey('op-1');
  t = await buildTestApp({ ...trusting(key), REGISTRATIONS_PER_MINUTE: '1000' });
});
afterAll(() => t.close());

const asOperator = async (overrides: Record<string, unknown> = {}) => {
  const claims = adminClaims(t.clock.now(), overrides);
  return { headers: { authorization: `Bearer ${await signClaims(key, claims)}` }, jti: claims.jti as string };
};
const admin = async (method: 'GET' | 'PUT' | 'POST', url: string, payload?: Record<string, unknown>) =>
  t.app.inject({ method, url, headers: (await asOperator()).headers, payload });
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
/** A cursor in the lookups' format (base64url JSON `[key, id]`), as a client could forge one. */
const forgedCursor = (key: string, id: string) => Buffer.from(JSON.stringify([key, id])).toString('base64url');

const auditRows = (target: string) =>
  t.database.sql<
    AuditRow[]
  >`select operator, token_id, source, action, target, outcome from operator_audit where target = ${target} order by id`;

async function addTrigger(installationId: string, accountId: string, automationId: string = randomUUID()): Promise<string> {
  const id = randomUUID();
  await t.database.db.insert(triggers).values({
    id,
    installationId,
    automationId,
    toolkit: 'gmail',
    triggerSlug: 'GMAIL_NEW_GMAIL_MESSAGE',
    connectedAccountId: accountId,
    composioTriggerId: `ti_${id.slice(0, 8)}`,
  });
  return id;
}

describe('looking up one installation', () => {
  it('shows plan, grant, activity, counts, queue, triggers and accounts, and never a token or hash', async () => {
    const { installationId, token, auth } = await register(t.app);
    const claims = grantClaims(t.clock.now(), { sub: 'cloud-lookup' });
    const grant = await signClaims(key, claims);
    expect((await t.app.inject({ method: 'PUT', url: '/v1/me/grant', headers: auth, payload: { grant } })).statusCode).toBe(200);
    const triggerId = await addTrigger(installationId, 'ca_one');
    await addTrigger(installationId, 'ca_one');
    await addTrigger(installationId, 'ca_two');
    const today = utcDay(t.clock.now());
    const threeDaysAgo = utcDay(new Date(t.clock.now().getTime() - 3 * 86_400_000));
    const tenDaysAgo = utcDay(new Date(t.clock.now().getTime() - 10 * 86_400_000));
    await t.database.db.insert(dailyUsage).values([
      { installationId, day: today, kept: 4, skipped: 1 },
      { installationId, day: threeDaysAgo, kept: 10, skipped: 2 },
      { installationId, day: tenDaysAgo, kept: 100, skipped: 100 },
    ]);
    await t.database.sql`
      update installations set last_event_position = 3, acked_event_position = 1 where id = ${installationId}`;
    const old = new Date(t.clock.now().getTime() - 90_000).toISOString();
    for (const position of [1, 2, 3]) {
      await t.database.sql`
        insert into events (installation_id, position, id, type, received_at, data)
        values (${installationId}, ${position}, ${`e-${installationId}-${position}`}, 'trigger.event',
                ${position === 2 ? old : t.clock.now().toISOString()}::timestamptz, '{}'::jsonb)`;
    }

    const response = await admin('GET', `/v1/admin/installations/${installationId}`);
    expect(response.statusCode).toBe(200);
    const body = response.json();
    expect(body).toMatchObject({
      id: installationId,
      plan: 'paid',
      disabledAt: null,
      grant: { jti: claims.jti, subject: 'cloud-lookup', plan: 'paid', revokedAt: null },
      events: { today: { day: today, kept: 4, skipped: 1, tests: 0 }, last7Days: { kept: 14, skipped: 3 } },
      queue: { depth: 2, oldestUnacknowledgedAt: old },
      connectedAccounts: 2,
    });
    expect(body.queue.oldestUnacknowledgedAgeSeconds).toBeGreaterThanOrEqual(90);
    expect(body.triggers).toHaveLength(3);
    expect(body.triggers[0]).toMatchObject({ id: triggerId, status: 'active', today: { kept: 0, skipped: 0 } });
    expect(typeof body.createdAt).toBe('string');
    expect(typeof body.lastSeenAt).toBe('string');

    const text = response.body;
    expect(text).not.toContain(token);
    expect(text).not.toContain(sha256(token));
    expect(text).not.toContain(grant);
    expect(text.toLowerCase()).not.toMatch(/token_?hash|tokenhash|"token"/);
  });

  it('answers 404 for an unknown id and 400 for a malformed one', async () => {
    const unknown = await admin('GET', `/v1/admin/installations/${randomUUID()}`);
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json()).toEqual({ error: 'no installation has this id', code: 'installation_not_found' });
    const malformed = await admin('GET', '/v1/admin/installations/nope');
    expect(malformed.statusCode).toBe(400);
    expect(malformed.json().code).toBe('invalid_request');
  });
});

describe('finding installations and grants', () => {
  it('filters and pages through installations without repeating or missing one', async () => {
    const subject = `cloud-${randomUUID()}`;
    const made: string[] = [];
    for (let i = 0; i < 5; i += 1) {
      const { installationId, auth } = await register(t.app);
      made.push(installationId);
      const grant = await signClaims(key, grantClaims(t.clock.now(), { sub: subject }));
      await t.app.inject({ method: 'PUT', url: '/v1/me/grant', headers: auth, payload: { grant } });
    }
    await admin('POST', `/v1/admin/installations/${made[0]}/disable`);

    const seen: string[] = [];
    let cursor: string | null = null;
    for (let pages = 0; pages < 10; pages += 1) {
      const url = `/v1/admin/installations?grantSubject=${subject}&limit=2${cursor ? `&cursor=${cursor}` : ''}`;
      const page = await admin('GET', url);
      expect(page.statusCode).toBe(200);
      const body = page.json<{ items: { id: string; plan: string }[]; nextCursor: string | null }>();
      seen.push(...body.items.map((item) => item.id));
      for (const item of body.items) expect(item.plan).toBe('paid');
      cursor = body.nextCursor;
      if (!cursor) break;
    }
    expect(seen).toEqual([...made].reverse());

    const disabled = (await admin('GET', `/v1/admin/installations?grantSubject=${subject}&disabled=true`)).json();
    expect(disabled.items.map((i: { id: string }) => i.id)).toEqual([made[0]]);
    const enabled = (await admin('GET', `/v1/admin/installations?grantSubject=${subject}&disabled=false&plan=paid`)).json();
    expect(enabled.items).toHaveLength(4);
    const future = new Date(t.clock.now().getTime() + 3_600_000).toISOString();
    const before = (await admin('GET', `/v1/admin/installations?grantSubject=${subject}&lastSeenBefore=${future}`)).json();
    expect(before.items).toHaveLength(5);
    const after = (await admin('GET', `/v1/admin/installations?grantSubject=${subject}&lastSeenAfter=${future}`)).json();
    expect(after.items).toHaveLength(0);
    expect((await admin('GET', `/v1/admin/installations?grantSubject=${subject}&plan=standard`)).json().items).toHaveLength(0);

    const grants = (await admin('GET', `/v1/admin/grants?subject=${subject}&limit=3`)).json();
    expect(grants.items).toHaveLength(3);
    expect(grants.nextCursor).toEqual(expect.any(String));
    const rest = (await admin('GET', `/v1/admin/grants?subject=${subject}&limit=3&cursor=${grants.nextCursor}`)).json();
    expect(rest.items).toHaveLength(2);
    expect(rest.nextCursor).toBeNull();
    const holders = [...grants.items, ...rest.items].map((g: { holderInstallationId: string }) => g.holderInstallationId);
    expect(new Set(holders)).toEqual(new Set(made));
    expect(JSON.stringify([grants, rest])).not.toMatch(/eyJ/); // no compact JWS anywhere
  });

  it.each([
    ['/v1/admin/installations?disabled=maybe', /^query\.disabled: /],
    ['/v1/admin/installations?lastSeenBefore=yesterday', /^query\.lastSeenBefore: /],
    ['/v1/admin/installations?cursor=garbage', /cursor/],
    ['/v1/admin/installations?limit=0', /^query\.limit: /],
    // Read as decimal digits only: Number() took these as 16, 10 and 5.
    ['/v1/admin/installations?limit=0x10', /^query\.limit: /],
    ['/v1/admin/grants?limit=1e1', /^query\.limit: /],
    ['/v1/admin/audit?limit=%205', /^query\.limit: /],
    // ISO 8601 only: Date.parse read these as 1 January 2001, 6 December 2001 and 2 March.
    ['/v1/admin/installations?lastSeenBefore=1', /^query\.lastSeenBefore: must be an ISO 8601 date/],
    ['/v1/admin/installations?lastSeenAfter=Dec%206', /^query\.lastSeenAfter: /],
    ['/v1/admin/installations?lastSeenBefore=2026-02-30', /^query\.lastSeenBefore: /],
    // A time without its offset would be read in the server's own zone.
    ['/v1/admin/installations?lastSeenBefore=2026-12-01T09:30:00', /^query\.lastSeenBefore: /],
    ['/v1/admin/grants?cursor=WyJ4IiwieSJd', /cursor/],
    ['/v1/admin/grants?installationId=nope', /^query\.installationId: /],
    ['/v1/admin/audit?cursor=-1', /^query\.cursor: /],
    // Well-formed cursors holding what Postgres would refuse to cast: 400, never a 500.
    [`/v1/admin/installations?cursor=${forgedCursor('2026-12-01 11:28:43+00', 'x')}`, /cursor/],
    [`/v1/admin/installations?cursor=${forgedCursor('2026-02-30 10:00:00+00', randomUUID())}`, /cursor/],
    [`/v1/admin/grants?cursor=${forgedCursor('2026-02-30 10:00:00+00', 'jti-1')}`, /cursor/],
    // Text filters holding what Postgres cannot compare (NUL): 400, never a 500.
    ['/v1/admin/installations?grantSubject=a%00b', /^query\.grantSubject: /],
    ['/v1/admin/grants?subject=%00', /^query\.subject: /],
    ['/v1/admin/audit?operator=%00', /^query\.operator: /],
    ['/v1/admin/audit?action=grant.revoke%00', /^query\.action: /],
    ['/v1/admin/audit?target=%00', /^query\.target: /],
    ['/v1/admin/installations?colour=blue', /unknown field colour/],
  ])('refuses %s with 400', async (url, message) => {
    const response = await admin('GET', url);
    expect(response.statusCode).toBe(400);
    expect(response.json()).toEqual({ error: expect.stringMatching(message), code: expect.any(String) });
  });
});

describe('the audit trail', () => {
  it('refuses a revocation whose jti Postgres cannot store with 400, and records nothing', async () => {
    const response = await admin('POST', '/v1/admin/grants/a%00b/revoke');
    expect(response.statusCode).toBe(400);
    expect(response.json()).toEqual({ error: expect.stringMatching(/^params\.jti: /), code: 'invalid_request' });
    const rows = await t.database.sql`select 1 from operator_audit where action = 'grant.revoke' and target like 'a%b'`;
    expect(rows).toHaveLength(0);
  });

  it("records each operator action with the admin token's sub and jti, time, target and outcome", async () => {
    const { installationId } = await register(t.app);
    const { headers, jti } = await asOperator({ sub: 'bea' });
    const post = (url: string) => t.app.inject({ method: 'POST', url, headers });
    expect((await post(`/v1/admin/installations/${installationId}/disable`)).statusCode).toBe(200);
    expect((await post(`/v1/admin/installations/${installationId}/disable`)).statusCode).toBe(200);
    expect((await post(`/v1/admin/installations/${installationId}/enable`)).statusCode).toBe(200);
    const grantId = randomUUID();
    expect((await post(`/v1/admin/grants/${grantId}/revoke`)).statusCode).toBe(200);
    await t.app.inject({ method: 'PUT', url: '/v1/admin/registration', headers, payload: { mode: 'closed' } });
    await t.app.inject({ method: 'PUT', url: '/v1/admin/registration', headers, payload: { mode: 'open' } });

    expect(await auditRows(installationId)).toEqual([
      { operator: 'bea', token_id: jti, source: 'api', action: 'installation.disable', target: installationId, outcome: 'disabled' },
      {
        operator: 'bea',
        token_id: jti,
        source: 'api',
        action: 'installation.disable',
        target: installationId,
        outcome: 'already disabled',
      },
      { operator: 'bea', token_id: jti, source: 'api', action: 'installation.enable', target: installationId, outcome: 'enabled' },
    ]);
    expect(await auditRows(grantId)).toEqual([
      { operator: 'bea', token_id: jti, source: 'api', action: 'grant.revoke', target: grantId, outcome: 'revoked' },
    ]);
    const registration = await auditRows('registration');
    expect(registration.slice(-2).map((r) => r.outcome)).toEqual(['closed', 'open']);

    const listed = await admin('GET', `/v1/admin/audit?operator=bea&limit=2`);
    expect(listed.statusCode).toBe(200);
    const page = listed.json();
    expect(page.entries).toHaveLength(2);
    expect(page.entries[0]).toMatchObject({ operator: 'bea', tokenId: jti, action: 'registration.set', outcome: 'open' });
    expect(page.entries[0].at).toBe(t.clock.now().toISOString());
    const next = (await admin('GET', `/v1/admin/audit?operator=bea&limit=10&cursor=${page.nextCursor}`)).json();
    expect(next.entries.map((e: { action: string }) => e.action)).toEqual([
      'grant.revoke',
      'installation.enable',
      'installation.disable',
      'installation.disable',
    ]);
    expect(next.nextCursor).toBeNull();
    const byTarget = (await admin('GET', `/v1/admin/audit?target=${installationId}&action=installation.enable`)).json();
    expect(byTarget.entries).toHaveLength(1);
  });

  it('leaves no row for a failed action', async () => {
    const unknown = randomUUID();
    expect((await admin('POST', `/v1/admin/installations/${unknown}/disable`)).statusCode).toBe(404);
    expect((await admin('POST', `/v1/admin/installations/${unknown}/enable`)).statusCode).toBe(404);
    expect(await auditRows(unknown)).toEqual([]);
  });

  it('undoes the action when its audit row cannot be written (same transaction)', async () => {
    const { installationId, auth } = await register(t.app);
    await t.database.sql.unsafe(`
      create function test_refuse_audit() returns trigger language plpgsql as $$
      begin raise exception 'audit refused'; end $$;
      create trigger test_refuse_audit before insert on operator_audit for each row execute function test_refuse_audit();`);
    try {
      const response = await admin('POST', `/v1/admin/installations/${installationId}/disable`);
      expect(response.statusCode).toBe(500);
      expect((await t.app.inject({ method: 'GET', url: '/v1/me', headers: auth })).statusCode).toBe(200);
      const [row] = await t.database.sql<
        { disabled_at: Date | null }[]
      >`select disabled_at from installations where id = ${installationId}`;
      expect(row?.disabled_at).toBeNull();
    } finally {
      await t.database.sql.unsafe('drop trigger test_refuse_audit on operator_audit; drop function test_refuse_audit();');
    }
  });

  it('is pruned by retention: entries older than the period go, newer ones stay', async () => {
    await t.database.sql`
      insert into operator_audit (at, operator, source, action, target, outcome)
      values (now() - interval '401 days', 'old', 'api', 'installation.disable', 'retention-old', 'disabled'),
             (now() - interval '399 days', 'old', 'api', 'installation.disable', 'retention-new', 'disabled')`;
    const removed = await removeExpiredAudit(t.database.sql, new Date(Date.now() - 400 * 86_400_000));
    expect(removed).toBeGreaterThanOrEqual(1);
    expect(await auditRows('retention-old')).toEqual([]);
    expect(await auditRows('retention-new')).toHaveLength(1);
  });
});

describe('changes the broker sees itself, and secret rotation', () => {
  it('records a change of operator keys once, by key id, when a broker starts with other keys', async () => {
    const rows = () => t.database.sql<{ details: { kids: string[]; added: string[]; removed: string[] } }[]>`
      select details from operator_audit where action = 'operator-keys.change' order by id`;
    const before = (await rows()).length;
    expect(await noteOperatorKeys(t.database.db, ['op-1'], t.clock.now())).toBe(before === 0);
    expect(await noteOperatorKeys(t.database.db, ['op-1'], t.clock.now())).toBe(false);
    expect(await noteOperatorKeys(t.database.db, ['op-2', 'op-1'], t.clock.now())).toBe(true);
    const after = await rows();
    expect(after.at(-1)!.details).toEqual({ kids: ['op-1', 'op-2'], added: ['op-2'], removed: [] });
    expect(await noteOperatorKeys(t.database.db, ['op-1', 'op-2'], t.clock.now())).toBe(false);
  });

  it('records a webhook secret rotation from the CLI, never the secret', async () => {
    const sim = await startSimulator({ apiKey: 'sim_audit_key', logger: false });
    try {
      const env = {
        COMPOSIO_API_KEY: sim.apiKey,
        COMPOSIO_BASE_URL: sim.origin,
        COMPOSIO_WEBHOOK_SECRET: 'the-old-secret',
        PUBLIC_URL: 'https://broker.example',
        DATABASE_URL: t.database.url,
      };
      const rotated = await runCli(['webhook', 'rotate-secret', '--as', 'erin'], env);
      expect(rotated.code).toBe(0);
      const secret = rotated.stdout.trim();
      const [row] = await t.database.sql<{ operator: string; source: string; outcome: string; text: string }[]>`
        select operator, source, outcome, row_to_json(a)::text as text from operator_audit a
         where action = 'webhook.rotate-secret' order by id desc limit 1`;
      expect(row).toMatchObject({ operator: 'erin', source: 'cli', outcome: 'rotated' });
      expect(row!.text).not.toContain(secret);
    } finally {
      await sim.close();
    }
  });
});

describe('the CLI', () => {
  const cli = (...args: string[]) => runCli(args, { DATABASE_URL: t.database.url, USER: 'carl' });

  it('shows one installation readably and as JSON, without its token or hash', async () => {
    const { installationId, token } = await register(t.app);
    await addTrigger(installationId, 'ca_cli', 'automation-cli');
    const shown = await cli('installation', 'show', installationId);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toMatch(new RegExp(`^installation +${installationId}$`, 'm'));
    expect(shown.stdout).toMatch(/^plan +standard$/m);
    expect(shown.stdout).toMatch(/^accounts +1$/m);
    expect(shown.stdout).toMatch(/^TRIGGER +AUTOMATION +SLUG/m);
    expect(shown.stdout).toMatch(/automation-cli +GMAIL_NEW_GMAIL_MESSAGE +ca_cli +active +0 +0/);
    const asJson = await cli('installation', 'show', installationId, '--json');
    expect(JSON.parse(asJson.stdout)).toMatchObject({
      id: installationId,
      connectedAccounts: 1,
      triggers: [{ automationId: 'automation-cli' }],
    });
    for (const out of [shown.stdout + shown.stderr, asJson.stdout + asJson.stderr]) {
      expect(out).not.toContain(token);
      expect(out).not.toContain(sha256(token));
    }
    const unknown = await cli('installation', 'show', randomUUID());
    expect(unknown).toMatchObject({ code: 1, stderr: expect.stringMatching(/no installation has this id/) });
    expect((await cli('installation', 'show', 'nope')).code).toBe(2);
  });

  it('lists installations and grants as a table or JSON, with filters and pages', async () => {
    const subject = `cloud-cli-${randomUUID()}`;
    const made: string[] = [];
    for (let i = 0; i < 3; i += 1) {
      const { installationId, auth } = await register(t.app);
      made.push(installationId);
      const grant = await signClaims(key, grantClaims(t.clock.now(), { sub: subject }));
      await t.app.inject({ method: 'PUT', url: '/v1/me/grant', headers: auth, payload: { grant } });
    }
    const first = await cli('installation', 'list', '--grant-subject', subject, '--limit', '2');
    expect(first.code).toBe(0);
    const lines = first.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^INSTALLATION +PLAN +CREATED +LAST SEEN +DISABLED +GRANT SUBJECT$/);
    expect(lines.slice(1).map((l) => l.split(/ +/)[0])).toEqual([made[2], made[1]]);
    const cursor = /--cursor (\S+)/.exec(first.stderr)?.[1];
    expect(cursor).toBeDefined();
    const second = await cli('installation', 'list', '--grant-subject', subject, '--cursor', cursor!, '--json');
    expect(JSON.parse(second.stdout)).toMatchObject({ items: [{ id: made[0], plan: 'paid' }], nextCursor: null });

    const grants = await cli('grant', 'list', '--subject', subject, '--json');
    expect(JSON.parse(grants.stdout).items).toHaveLength(3);
    expect(grants.stdout).not.toMatch(/eyJ/);
    expect((await cli('installation', 'list', '--plan', 'gold')).code).toBe(2);
    expect((await cli('installation', 'list', '--cursor', 'garbage')).code).toBe(1);
  });

  it('prints the admin token id (jti) of an API action in the audit table', async () => {
    const { installationId } = await register(t.app);
    const { headers, jti } = await asOperator({ sub: 'gus' });
    const disabled = await t.app.inject({ method: 'POST', url: `/v1/admin/installations/${installationId}/disable`, headers });
    expect(disabled.statusCode).toBe(200);
    const trail = await cli('audit', '--target', installationId);
    expect(trail.code).toBe(0);
    const [header, row, ...rest] = trail.stdout.trimEnd().split('\n');
    expect(rest).toEqual([]);
    expect(header).toMatch(/^AT +OPERATOR +TOKEN ID +SOURCE +ACTION +TARGET +OUTCOME$/);
    expect(row).toMatch(new RegExp(`^\\S+ +gus +${jti} +api +installation\\.disable +${installationId} +disabled$`));
    // The column stands where its header does.
    expect(row!.indexOf(jti)).toBe(header!.indexOf('TOKEN ID'));
  });

  it('records an import with the name given, in its transaction, and nothing for a dry run; `audit` prints the trail', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'omb-audit-'));
    try {
      const id = randomUUID();
      const file = path.join(dir, 'export.json');
      await writeFile(
        file,
        JSON.stringify([
          { id, token_hash: 'a'.repeat(64), composio_user_id: `omb_${id.replaceAll('-', '')}`, created_at: '2025-04-01T09:30:00Z' },
        ]),
      );
      const before = (
        await t.database.sql<{ n: number }[]>`select count(*)::int as n from operator_audit where action = 'installations.import'`
      )[0]!.n;
      expect((await cli('import', '--file', file, '--dry-run')).code).toBe(0);
      const afterDry = (
        await t.database.sql<{ n: number }[]>`select count(*)::int as n from operator_audit where action = 'installations.import'`
      )[0]!.n;
      expect(afterDry).toBe(before);
      expect((await cli('import', '--file', file, '--as', 'dora')).code).toBe(0);

      const trail = await cli('audit', '--action', 'installations.import', '--limit', '1');
      expect(trail.code).toBe(0);
      expect(trail.stdout).toMatch(/^AT +OPERATOR +TOKEN ID +SOURCE +ACTION +TARGET +OUTCOME$/m);
      expect(trail.stdout).toMatch(/dora +- +cli +installations\.import +- +imported 1, skipped 0, invalid 0/);
      const asJson = JSON.parse((await cli('audit', '--operator', 'dora', '--json')).stdout);
      expect(asJson.entries[0]).toMatchObject({ operator: 'dora', tokenId: null, source: 'cli', details: { file, imported: 1 } });
      expect((await cli('audit', '--since', 'whenever')).code).toBe(2);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
