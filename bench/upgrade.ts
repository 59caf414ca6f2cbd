import { randomUUID } from 'node:crypto';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { drizzle } from 'drizzle-orm/postgres-js';
import { migrate } from 'drizzle-orm/postgres-js/migrator';
import postgres from 'postgres';
import { startEmbeddedPostgres } from '../src/db/embedded.js';
import { applyMigrations, MIGRATIONS_FOLDER } from '../src/db/migrate.js';
import { createLogger } from '../src/logger.js';
import { fmt } from './lib.js';

/**
 * `npm run bench:upgrade -- --rows N` (default 1,000,000): how long the upgrade to day
 * partitions (migrations/0011_events_by_day.sql) keeps the broker from serving. A database at
 * the schema before it gets N events over 7 days and 20,000 installations, then the remaining
 * migrations run as a broker runs them at start, timed. The last line is a JSON object.
 */
const { values: args } = parseArgs({ options: { rows: { type: 'string', default: '1000000' } } });
const ROWS = Number(args.rows);
const INSTALLATIONS = 20_000;
const BEFORE_PARTITIONS = '0005_ingest_reads_the_plan_and_names_what_it_queued';

const log = createLogger('warn');
const dataDir = await mkdtemp(path.join(tmpdir(), 'omb-bench-upgrade-'));
const folder = await mkdtemp(path.join(tmpdir(), 'omb-bench-upgrade-migrations-'));
const embedded = await startEmbeddedPostgres({ dataDir, logger: log, database: 'omb_upgrade' });
try {
  await cp(MIGRATIONS_FOLDER, folder, { recursive: true });
  const journalPath = path.join(folder, 'meta', '_journal.json');
  const journal = JSON.parse(await readFile(journalPath, 'utf8')) as { entries: Array<{ tag: string }> };
  journal.entries = journal.entries.slice(0, journal.entries.findIndex((e) => e.tag === BEFORE_PARTITIONS) + 1);
  await writeFile(journalPath, JSON.stringify(journal));
  const sql = postgres(embedded.url, { max: 1, onnotice: () => {} });
  try {
    await migrate(drizzle(sql), { migrationsFolder: folder });
    await sql`
      insert into installations (id, token_hash, composio_user_id)
      select gen_random_uuid(), md5(g::text) || md5((-g)::text), 'omb_' || g from generate_series(1, ${INSTALLATIONS}) g`;
    await sql`create temporary table ids as select row_number() over (order by id) - 1 as k, id from installations`;
    const start = Date.now() - 7 * 86_400_000;
    const step = (7 * 86_400_000) / ROWS;
    for (let from = 0; from < ROWS; from += 250_000) {
      const to = Math.min(ROWS, from + 250_000) - 1;
      await sql`
        insert into events (installation_id, position, id, type, received_at, data)
        select i.id, g / ${INSTALLATIONS} + 1, ${`msg_${randomUUID()}_`} || g, 'trigger.event',
               to_timestamp((${start}::float8 + g * ${step}::float8) / 1000.0),
               jsonb_build_object('issue', jsonb_build_object('number', g, 'body', repeat(md5(g::text), 19)))
          from generate_series(${from}::bigint, ${to}::bigint) g join ids i on i.k = g % ${INSTALLATIONS}`;
    }
    await sql`vacuum analyze events`;
  } finally {
    await sql.end();
  }
  const t0 = performance.now();
  await applyMigrations(embedded.url, log);
  const seconds = (performance.now() - t0) / 1000;
  process.stdout.write(`upgrade of ${fmt.int(ROWS)} events: ${seconds.toFixed(1)} s\n`);
  process.stdout.write(`${JSON.stringify({ rows: ROWS, upgradeSeconds: Math.round(seconds * 10) / 10 })}\n`);
} finally {
  await embedded.stop();
  await rm(dataDir, { recursive: true, force: true });
  await rm(folder, { recursive: true, force: true });
}
