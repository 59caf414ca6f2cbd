import { randomBytes, randomUUID } from 'node:crypto';
import { Agent } from 'node:http';
import { parseArgs } from 'node:util';
import postgres from 'postgres';
import { startEmbeddedPostgres } from '../src/db/embedded.js';
import { applyMigrations } from '../src/db/migrate.js';
import { dropExpiredDays } from '../src/events/retention/retention.js';
import { composioUserIdFor, hashToken } from '../src/installations/tokens.js';
import { createLogger } from '../src/logger.js';
import {
  benchRun,
  type Child,
  fmt,
  heading,
  httpCall,
  issueWebhook,
  type LoadResult,
  line,
  median,
  percentile,
  rounded,
  runLoad,
  startChild,
} from './lib.js';

/**
 * `npm run bench:scale -- --rows N`: what the size of the queue costs. One embedded Postgres
 * holds two databases, migrated alike and with the same 20,000 installations: `empty` (one event
 * each, received yesterday) and `full` (N events, default 8,000,000, spread over the 8 days before today, written in
 * SQL). A broker runs on each. Every figure is taken on both in paired rounds, in alternating
 * order, and reported as full ÷ empty: ingest rate and p50/p99 at 64 senders, WAL bytes per
 * event, poll p50/p99, the time to expire one day, and ingest while that day is expired. The
 * last line is one JSON object with the ratios (medians of the rounds).
 *
 * Options: --rows N, --rounds R (default 3, at most 8: each round expires one day),
 * --seconds S (each measured run, default 5), --shared-buffers SIZE (Postgres's `shared_buffers`,
 * e.g. `1GB`; default Postgres's own 128MB).
 */

const { values: args } = parseArgs({
  options: {
    rows: { type: 'string', default: '8000000' },
    rounds: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '5' },
    'shared-buffers': { type: 'string' },
  },
});
const ROWS = Number(args.rows);
const ROUNDS = Math.min(8, Number(args.rounds));
const RUN_MS = Number(args.seconds) * 1000;
const WARMUP_MS = 1000;
const SENDERS = 64;
const POLLERS = 16;
const INSTALLATIONS = 20_000;
const FILL_DAYS = 8;
const SECRET = 'whsec_bench_scale_0123456789abcdef';
const DAY_MS = 86_400_000;
if (!Number.isInteger(ROWS) || ROWS < INSTALLATIONS) throw new Error(`--rows must be an integer of at least ${INSTALLATIONS}`);

interface Seeded {
  installationId: string;
  token: string;
  composioTriggerId: string;
}

interface Target {
  readonly name: 'empty' | 'full';
  readonly sql: postgres.Sql;
  readonly broker: Child;
}

const log = createLogger('warn');
const { startedAt, dataDir, cleanups, run } = await benchRun('omb-bench-scale-');

async function main(): Promise<void> {
  const embedded = await startEmbeddedPostgres({
    dataDir,
    logger: log,
    database: 'postgres',
    extraFlags: ['-c', 'max_connections=300', ...(args['shared-buffers'] ? ['-c', `shared_buffers=${args['shared-buffers']}`] : [])],
  });
  cleanups.push(() => embedded.stop());
  const admin = postgres(embedded.url, { max: 1, onnotice: () => {} });
  cleanups.push(() => admin.end({ timeout: 5 }));
  const installations = Array.from({ length: INSTALLATIONS }, (_, i) => ({
    installationId: randomUUID(),
    token: randomBytes(32).toString('hex'),
    composioTriggerId: `ti_scale_${i}`,
  }));

  const targets: Target[] = [];
  for (const name of ['empty', 'full'] as const) {
    await admin.unsafe(`create database omb_${name}`);
    const url = new URL(embedded.url);
    url.pathname = `/omb_${name}`;
    await applyMigrations(url.toString(), log);
    const sql = postgres(url.toString(), { max: 8, onnotice: () => {} });
    cleanups.push(() => sql.end({ timeout: 5 }));
    await seed(sql, installations);
    const t0 = performance.now();
    await fill(sql, name === 'full' ? ROWS : INSTALLATIONS, name === 'full' ? FILL_DAYS : 1);
    process.stdout.write(
      `${name}: ${fmt.int(name === 'full' ? ROWS : INSTALLATIONS)} events written in ${((performance.now() - t0) / 1000).toFixed(0)} s\n`,
    );
    const broker = await startChild('src/main.ts', {
      DATABASE_URL: url.toString(),
      COMPOSIO_API_KEY: 'ak_bench',
      COMPOSIO_BASE_URL: 'http://127.0.0.1:9',
      COMPOSIO_WEBHOOK_SECRET: SECRET,
      QUOTA_STANDARD: '10000000',
      QUOTA_PAID: '10000000',
      // The bench expires days itself, when it measures it.
      EVENT_RETENTION_DAYS: '365',
      LOG_LEVEL: 'warn',
    });
    cleanups.push(() => broker.stop());
    targets.push({ name, sql, broker });
  }
  // Unrecorded: the first writes of a run create each installation's counters of the day.
  for (const target of targets) await ingestRun(admin, target, installations);
  process.stdout.write(`Ready: ${fmt.int(ROWS)} rows against one event per installation, ${ROUNDS} paired rounds of ${RUN_MS / 1000} s.\n`);

  const figures: Record<string, Record<Target['name'], number[]>> = {};
  const record = (key: string, target: Target, value: number) => {
    figures[key] ??= { empty: [], full: [] };
    figures[key][target.name].push(value);
  };

  for (let round = 0; round < ROUNDS; round++) {
    heading(`Round ${round + 1}`);
    const order = round % 2 === 0 ? targets : [...targets].reverse();
    for (const target of order) {
      const ingest = await ingestRun(admin, target, installations);
      record('ingestRate', target, rate(ingest.load));
      record('ingestP50', target, percentile(ingest.load.latenciesMs, 50));
      record('ingestP99', target, percentile(ingest.load.latenciesMs, 99));
      record('walPerEvent', target, ingest.walBytes / Math.max(1, ingest.accepted));
      line(`${target.name}: ingest`, ...loadLine(ingest.load), `WAL ${fmt.int(ingest.walBytes / Math.max(1, ingest.accepted))} B/event`);

      const poll = await pollRun(target, installations);
      record('pollP50', target, percentile(poll.latenciesMs, 50));
      record('pollP99', target, percentile(poll.latenciesMs, 99));
      line(`${target.name}: GET /v1/events?wait=0&limit=1`, ...loadLine(poll));

      const expiry = await expiryRun(admin, target, installations, round);
      record('expireDaySeconds', target, expiry.seconds);
      record('ingestDuringExpiryRate', target, rate(expiry.load));
      record('ingestDuringExpiryRatio', target, rate(expiry.load) / rate(ingest.load));
      line(
        `${target.name}: expire one day (${expiry.days.join(', ') || 'nothing to drop'})`,
        `${fmt.ms(expiry.seconds * 1000)}`,
        `ingest meanwhile ${fmt.rate(rate(expiry.load))} (${(rate(expiry.load) / rate(ingest.load)).toFixed(2)}× its normal), p99 ${fmt.ms(percentile(expiry.load.latenciesMs, 99))}`,
      );
    }
  }

  const [dead] = await targets[1]!.sql<{ dead: number }[]>`
    select coalesce(sum(n_dead_tup), 0)::int as dead from pg_stat_user_tables where relname like 'events%'`;
  const ratio = (key: string) => median(figures[key]!.full.map((full, i) => full / figures[key]!.empty[i]!));
  const result = {
    rows: ROWS,
    rounds: ROUNDS,
    sharedBuffers: args['shared-buffers'] ?? '128MB',
    ingestRatio: rounded(ratio('ingestRate')),
    ingestP50Ratio: rounded(ratio('ingestP50')),
    ingestP99Ratio: rounded(ratio('ingestP99')),
    walPerEventRatio: rounded(ratio('walPerEvent')),
    pollP50Ratio: rounded(ratio('pollP50')),
    pollP99Ratio: rounded(ratio('pollP99')),
    expireDaySeconds: rounded(Math.max(...figures.expireDaySeconds!.full), 3),
    ingestDuringExpiryRatio: rounded(median(figures.ingestDuringExpiryRatio!.full)),
    deadTuplesAfterExpiry: dead!.dead,
    walPerEventBytes: { empty: Math.round(median(figures.walPerEvent!.empty)), full: Math.round(median(figures.walPerEvent!.full)) },
    ingestP99Ms: { empty: rounded(median(figures.ingestP99!.empty)), full: rounded(median(figures.ingestP99!.full)) },
    seconds: Math.round((performance.now() - startedAt) / 1000),
  };
  heading('Full ÷ empty (medians of the paired rounds)');
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

/** The same installations (with a token and one trigger) in each database. */
async function seed(sql: postgres.Sql, installations: Seeded[]): Promise<void> {
  for (let i = 0; i < installations.length; i += 2000) {
    const chunk = installations.slice(i, i + 2000);
    await sql`insert into installations ${sql(
      chunk.map((s) => ({ id: s.installationId, token_hash: hashToken(s.token), composio_user_id: composioUserIdFor(s.installationId) })),
    )}`;
    await sql`insert into triggers ${sql(
      chunk.map((s, n) => ({
        id: randomUUID(),
        installation_id: s.installationId,
        automation_id: `a_scale_${i + n}`,
        toolkit: 'github',
        trigger_slug: 'GITHUB_ISSUE_ADDED_EVENT',
        connected_account_id: `ca_scale_${i + n}`,
        composio_trigger_id: s.composioTriggerId,
      })),
    )}`;
  }
}

/**
 * `rows` events, evenly over the `days` days before today and round-robin over the
 * installations (so each queue's positions are contiguous and in time order), with a payload the
 * size of a GitHub issue webhook's. Every installation has acknowledged all but its last event,
 * so a poll without cursor reads one event. Day partitions exist from the first day filled.
 */
async function fill(sql: postgres.Sql, rows: number, days: number): Promise<void> {
  const today = new Date().toISOString().slice(0, 10);
  await sql`select omb_event_partitions_ensure(${today}::date - ${FILL_DAYS}::int, ${today}::date + 3)`;
  await sql`create temporary table fill_installations as
              select row_number() over (order by i.id) - 1 as k, i.id, t.id as trigger_id, t.automation_id
                from installations i join triggers t on t.installation_id = i.id`;
  await sql`create index on fill_installations (k)`;
  const start = Date.parse(`${today}T00:00:00Z`) - days * DAY_MS;
  const stepMs = (days * DAY_MS - 60_000) / rows;
  const chunk = 250_000;
  for (let from = 0; from < rows; from += chunk) {
    const to = Math.min(rows, from + chunk) - 1;
    await sql`
      insert into events (installation_id, position, id, type, trigger_id, automation_id, toolkit, trigger_slug,
                          connected_account_id, received_at, data)
      select f.id, g / ${INSTALLATIONS} + 1, 'msg_fill_' || g || '_' || md5(g::text), 'trigger.event', f.trigger_id, f.automation_id,
             'github', 'GITHUB_ISSUE_ADDED_EVENT', 'ca_scale', to_timestamp((${start}::float8 + g * ${stepMs}::float8) / 1000.0),
             jsonb_build_object('action', 'opened',
               'issue', jsonb_build_object('number', g, 'title', 'Crash when the window is resized twice',
                                           'body', repeat(md5(g::text), 19), 'labels', jsonb_build_array('bug', 'p1')),
               'repository', jsonb_build_object('full_name', 'openmausbot/desktop'),
               'sender', jsonb_build_object('login', 'octocat'))
        from generate_series(${from}::bigint, ${to}::bigint) g
        join fill_installations f on f.k = g % ${INSTALLATIONS}`;
    if (rows > chunk) process.stdout.write(`  ${fmt.int(to + 1)} / ${fmt.int(rows)}\r`);
  }
  await sql`
    update installations i set last_event_position = c.n, acked_event_position = c.n - 1
      from (select installation_id, max(position) as n from events group by installation_id) c
     where c.installation_id = i.id`;
  await sql`vacuum analyze`;
}

const pick = (installations: Seeded[]) => installations[Math.floor(Math.random() * installations.length)]!;

/**
 * 64 senders for RUN_MS; WAL written over the whole run (warm-up included) per event accepted.
 * Each run starts right after a checkpoint, so each pays the full-page images of the pages it is
 * the first to touch, as ingest does after every checkpoint.
 */
async function ingestRun(admin: postgres.Sql, target: Target, installations: Seeded[], during?: () => Promise<void>) {
  const agent = new Agent({ keepAlive: true, maxSockets: SENDERS });
  let accepted = 0;
  await admin`checkpoint`;
  const [before] = await admin<{ lsn: string }[]>`select pg_current_wal_lsn()::text as lsn`;
  const loading = runLoad({
    concurrency: SENDERS,
    warmupMs: WARMUP_MS,
    durationMs: RUN_MS,
    call: async () => {
      const webhook = issueWebhook(pick(installations), SECRET, 'scale');
      const answer = await httpCall(agent, `${target.broker.url}/v1/webhooks/composio`, {
        method: 'POST',
        headers: webhook.headers,
        body: webhook.body,
      });
      const ok = answer.status === 200 && answer.body.includes('accepted');
      if (ok) accepted++;
      return ok;
    },
  });
  const extra = during?.();
  const load = await loading;
  await extra;
  const [after] = await admin<{ bytes: string }[]>`select pg_wal_lsn_diff(pg_current_wal_lsn(), ${before!.lsn}::pg_lsn)::bigint as bytes`;
  agent.destroy();
  return { load, accepted, walBytes: Number(after!.bytes) };
}

/** 16 pollers reading the newest event of random installations (no cursor, limit 1). */
async function pollRun(target: Target, installations: Seeded[]): Promise<LoadResult> {
  const agent = new Agent({ keepAlive: true, maxSockets: POLLERS });
  const load = await runLoad({
    concurrency: POLLERS,
    warmupMs: WARMUP_MS,
    durationMs: RUN_MS,
    call: async () => {
      const answer = await httpCall(agent, `${target.broker.url}/v1/events?wait=0&limit=1`, {
        headers: { authorization: `Bearer ${pick(installations).token}` },
      });
      return answer.status === 200 && answer.body.includes('"events":[{');
    },
  });
  agent.destroy();
  return load;
}

/** Ingest as in ingestRun, with the oldest remaining filled day expired 1.5 s in. */
async function expiryRun(admin: postgres.Sql, target: Target, installations: Seeded[], round: number) {
  const today = Date.parse(`${new Date().toISOString().slice(0, 10)}T00:00:00Z`);
  const horizon = new Date(today - (FILL_DAYS - 1 - round) * DAY_MS);
  let seconds = Number.NaN;
  let days: string[] = [];
  const run = await ingestRun(admin, target, installations, async () => {
    await new Promise((resolve) => setTimeout(resolve, WARMUP_MS + 1500));
    const t0 = performance.now();
    days = (await dropExpiredDays(target.sql, horizon)).days;
    seconds = (performance.now() - t0) / 1000;
  });
  return { ...run, seconds, days };
}

const rate = (load: LoadResult) => load.requests / load.seconds;
const loadLine = (load: LoadResult) => [
  fmt.rate(rate(load)).padStart(9),
  `p50 ${fmt.ms(percentile(load.latenciesMs, 50))}`,
  `p99 ${fmt.ms(percentile(load.latenciesMs, 99))}`,
  ...(load.failures > 0 ? [`(${load.failures} failed)`] : []),
];

await run(main, { sayHowLong: false });
