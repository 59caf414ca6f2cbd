import type { Config } from '../../config.js';
import type { Database } from '../../db/database.js';
import { AppError } from '../../errors.js';
import { listAudit } from '../audit.js';
import { INSTANT_RULE, readInstant } from '../instant.js';
import { type InstallationSummary, installationDetail, listGrants, listInstallations, MAX_PAGE } from '../lookups.js';
import { type CliEnv, type CliIo, type Command, CommandFailed, cliConfig, parseOptions, UsageError, wholeNumberOption } from './command.js';
import { cliLogger, withBrokerDatabase } from './database.js';

/**
 * The operators' lookups at the terminal, straight from the broker's database (no admin token:
 * whoever has the database has the data). The same functions answer `/v1/admin/…`, so the CLI
 * shows exactly what the API does; tokens and hashes are never read.
 */

function withDatabase<T>(env: CliEnv, io: CliIo, work: (database: Database, config: Config) => Promise<T>): Promise<T> {
  const config = cliConfig(env);
  return withBrokerDatabase(config, cliLogger(config, io), (database) => work(database, config));
}

/** An `AppError` (bad cursor, unknown id) is the command's one-line failure. */
async function asCommand<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof AppError) throw new CommandFailed(error.message);
    throw error;
  }
}

function flag(value: string | undefined, name: string): boolean | undefined {
  if (value === undefined) return undefined;
  if (value === 'true' || value === 'yes') return true;
  if (value === 'false' || value === 'no') return false;
  throw new UsageError(`${name} must be true or false`);
}

function instant(value: string | undefined, name: string): Date | undefined {
  if (value === undefined) return undefined;
  const at = readInstant(value.trim());
  if (!at) throw new UsageError(`${name} ${INSTANT_RULE}`);
  return at;
}

function limitOf(value: string | undefined): number {
  return value === undefined ? 50 : wholeNumberOption(value, '--limit', MAX_PAGE);
}

/** Columns padded to their widest cell; the last column is not padded. */
function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return `${[line(header), ...rows.map(line)].join('\n')}\n`;
}

const dash = (value: string | null | undefined) => value ?? '-';
const json = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * An installation id as `/v1/me` (`installationId`) and `installation list` print it. A prefix is
 * refused, not looked up: a short prefix can match several installations, and an operator acting
 * on the one it happened to find would act on the wrong one.
 */
function fullInstallationId(value: string): string {
  if (UUID.test(value)) return value.toLowerCase();
  const prefix = /^[0-9a-f][0-9a-f-]*…?$/i.test(value) && value.replace('…', '').length < 36;
  throw new UsageError(
    prefix
      ? `ID must be a full installation id (36 characters); "${value}" looks like a prefix, and prefixes are not looked up`
      : 'ID must be a full installation id (a UUID, as installationId in /v1/me or `installation list` prints it)',
  );
}

export const installationShow: Command = {
  name: 'installation show',
  summary: 'one installation in full: plan, grant, activity, events, queue, triggers',
  usage: `Usage: npm run cli -- installation show ID [--json]

ID is the installation's full id (a UUID, as /v1/me's installationId and \`installation list\`
print it); a prefix is refused. Prints the installation's plan and grant (jti, subject, expiry),
when it was created and last seen, whether it is disabled, today's and the last 7 days'
kept/skipped events, its queue (depth, oldest unacknowledged event), its triggers with status
and today's counts, and how many connected accounts its triggers use. --json prints what GET /v1/admin/installations/ID answers.`,

  async run(args, io, env) {
    const [id, ...rest] = args;
    if (!id || id.startsWith('-')) throw new UsageError('the installation id is required');
    const wanted = fullInstallationId(id);
    const { values } = parseOptions(rest, { json: { type: 'boolean' } });
    const detail = await withDatabase(env, io, (database) => asCommand(() => installationDetail(database.db, wanted, new Date())));
    if (values.json) {
      io.out(json(detail));
      return 0;
    }
    const grant = detail.grant;
    const lines = [
      `installation  ${detail.id}`,
      `plan          ${detail.plan}`,
      `grant         ${grant ? `${grant.jti} for ${grant.subject}, expires ${grant.expiresAt}${grant.revokedAt ? `, revoked ${grant.revokedAt}` : ''}` : '-'}`,
      `created       ${detail.createdAt}`,
      `last seen     ${detail.lastSeenAt}`,
      `disabled      ${dash(detail.disabledAt)}`,
      `today         kept ${detail.events.today.kept}, skipped ${detail.events.today.skipped}, tests ${detail.events.today.tests} (${detail.events.today.day})`,
      `last 7 days   kept ${detail.events.last7Days.kept}, skipped ${detail.events.last7Days.skipped} (since ${detail.events.last7Days.from})`,
      `queue         ${detail.queue.depth} unacknowledged${detail.queue.oldestUnacknowledgedAgeSeconds === null ? '' : `, oldest ${detail.queue.oldestUnacknowledgedAgeSeconds} s`}`,
      `accounts      ${detail.connectedAccounts}`,
      `triggers      ${detail.triggers.length}`,
    ];
    io.out(`${lines.join('\n')}\n`);
    if (detail.triggers.length > 0) {
      io.out(
        `\n${table(
          ['TRIGGER', 'AUTOMATION', 'SLUG', 'ACCOUNT', 'STATUS', 'KEPT', 'SKIPPED'],
          detail.triggers.map((t) => [
            t.id,
            t.automationId,
            t.triggerSlug,
            t.connectedAccountId,
            t.status,
            String(t.today.kept),
            String(t.today.skipped),
          ]),
        )}`,
      );
    }
    return 0;
  },
};

export const installationList: Command = {
  name: 'installation list',
  summary: 'find installations by state, plan, activity or grant subject',
  usage: `Usage: npm run cli -- installation list [filters] [--limit N] [--cursor C] [--json]

  --disabled true|false     only disabled (or enabled) installations
  --plan standard|paid      by the plan they are on now
  --seen-before T           last seen before this time: an ISO 8601 date (2026-12-01, midnight
                            UTC) or date and time with its offset (2026-12-01T09:30:00Z)
  --seen-after T            last seen after this time, written the same way
  --grant-subject SUB       holding a grant issued to this Cloud
  --limit N                 at most N (default 50, at most ${MAX_PAGE}); newest first
  --cursor C                the next page, as printed after a full page
  --json                    what GET /v1/admin/installations answers`,

  async run(args, io, env) {
    const { values } = parseOptions(args, {
      disabled: { type: 'string' },
      plan: { type: 'string' },
      'seen-before': { type: 'string' },
      'seen-after': { type: 'string' },
      'grant-subject': { type: 'string' },
      limit: { type: 'string' },
      cursor: { type: 'string' },
      json: { type: 'boolean' },
    });
    const plan = values.plan;
    if (plan !== undefined && plan !== 'standard' && plan !== 'paid') throw new UsageError('--plan must be standard or paid');
    const filters = {
      disabled: flag(values.disabled, '--disabled'),
      plan: plan as 'standard' | 'paid' | undefined,
      lastSeenBefore: instant(values['seen-before'], '--seen-before'),
      lastSeenAfter: instant(values['seen-after'], '--seen-after'),
      grantSubject: values['grant-subject'],
    };
    const limit = limitOf(values.limit);
    const page = await withDatabase(env, io, (database) =>
      asCommand(() => listInstallations(database.sql, new Date(), filters, { limit, cursor: values.cursor })),
    );
    if (values.json) {
      io.out(json(page));
      return 0;
    }
    io.out(
      table(
        ['INSTALLATION', 'PLAN', 'CREATED', 'LAST SEEN', 'DISABLED', 'GRANT SUBJECT'],
        page.items.map((i: InstallationSummary) => [i.id, i.plan, i.createdAt, i.lastSeenAt, dash(i.disabledAt), dash(i.grant?.subject)]),
      ),
    );
    io.err(`${page.items.length} installation(s)${page.nextCursor ? `; more with --cursor ${page.nextCursor}` : ''}\n`);
    return 0;
  },
};

export const grantList: Command = {
  name: 'grant list',
  summary: 'find grants by subject, holder, revoked or expired',
  usage: `Usage: npm run cli -- grant list [--subject SUB] [--installation ID] [--revoked true|false]
                             [--expired true|false] [--limit N] [--cursor C] [--json]

Grants the broker has seen presented, newest issued first. The grants themselves (the signed
tokens) are never stored, so never printed.`,

  async run(args, io, env) {
    const { values } = parseOptions(args, {
      subject: { type: 'string' },
      installation: { type: 'string' },
      revoked: { type: 'string' },
      expired: { type: 'string' },
      limit: { type: 'string' },
      cursor: { type: 'string' },
      json: { type: 'boolean' },
    });
    const installationId = values.installation;
    if (installationId !== undefined && !UUID.test(installationId)) {
      throw new UsageError('--installation must be a UUID');
    }
    const filters = {
      subject: values.subject,
      installationId,
      revoked: flag(values.revoked, '--revoked'),
      expired: flag(values.expired, '--expired'),
    };
    const limit = limitOf(values.limit);
    const page = await withDatabase(env, io, (database) =>
      asCommand(() => listGrants(database.db, new Date(), filters, { limit, cursor: values.cursor })),
    );
    if (values.json) {
      io.out(json(page));
      return 0;
    }
    io.out(
      table(
        ['JTI', 'SUBJECT', 'HOLDER', 'ISSUED', 'EXPIRES', 'REVOKED'],
        page.items.map((g) => [g.jti, g.subject, dash(g.holderInstallationId), g.issuedAt, g.expiresAt, dash(g.revokedAt)]),
      ),
    );
    io.err(`${page.items.length} grant(s)${page.nextCursor ? `; more with --cursor ${page.nextCursor}` : ''}\n`);
    return 0;
  },
};

export const auditCommand: Command = {
  name: 'audit',
  summary: 'the operators’ audit trail, newest first',
  usage: `Usage: npm run cli -- audit [--operator SUB] [--action A] [--target T] [--since T] [--until T]
                        [--limit N] [--cursor C] [--json]

Every operator action (installation.disable/enable, grant.revoke, registration.set,
installations.import, webhook.rotate-secret, operator-keys.change) with who (the admin token's
sub, and its jti in the TOKEN ID column; the CLI's --as, with no token), when, on what and with
what outcome. T is an ISO 8601 date (2026-12-01, midnight UTC) or date and time with its offset
(2026-12-01T09:30:00Z).`,

  async run(args, io, env) {
    const { values } = parseOptions(args, {
      operator: { type: 'string' },
      action: { type: 'string' },
      target: { type: 'string' },
      since: { type: 'string' },
      until: { type: 'string' },
      limit: { type: 'string' },
      cursor: { type: 'string' },
      json: { type: 'boolean' },
    });
    if (values.cursor !== undefined && !/^[1-9][0-9]{0,17}$/.test(values.cursor))
      throw new UsageError('--cursor is not a cursor audit printed');
    const query = {
      limit: limitOf(values.limit),
      before: values.cursor === undefined ? undefined : Number(values.cursor),
      operator: values.operator,
      action: values.action,
      target: values.target,
      since: instant(values.since, '--since'),
      until: instant(values.until, '--until'),
    };
    const page = await withDatabase(env, io, (database) => listAudit(database.db, query));
    if (values.json) {
      io.out(json(page));
      return 0;
    }
    io.out(
      table(
        ['AT', 'OPERATOR', 'TOKEN ID', 'SOURCE', 'ACTION', 'TARGET', 'OUTCOME'],
        page.entries.map((e) => [e.at, e.operator, dash(e.tokenId), e.source, e.action, dash(e.target), e.outcome]),
      ),
    );
    io.err(
      `${page.entries.length} entr${page.entries.length === 1 ? 'y' : 'ies'}${page.nextCursor ? `; more with --cursor ${page.nextCursor}` : ''}\n`,
    );
    return 0;
  },
};
