import { Agent } from 'node:http';
import { parseArgs } from 'node:util';
import { createComposioGateway } from '../src/composio/index.js';
import { openDatabase } from '../src/db/database.js';
import { startEmbeddedPostgres } from '../src/db/embedded.js';
import { applyMigrations } from '../src/db/migrate.js';
import { composioUserIdFor } from '../src/installations/tokens.js';
import { createLogger } from '../src/logger.js';
import { MANY_TRIGGERS_TOOLKIT } from '../src/sim/catalog.js';
import { type RecordedRequest, type Simulator, startSimulator } from '../src/sim/index.js';
import { reconcileTriggers } from '../src/triggers/reconcile.js';
import { benchRun, type Child, heading, httpCall, line, startChild } from './lib.js';

/**
 * `npm run bench:composio`: how many Composio calls each connected-app route costs, counted where
 * they arrive (the simulator's request log), against a simulator as large as Composio (1,000
 * toolkits; `--toolkits N` for another size). Strict by default: a page larger than Composio
 * takes is refused, as the stricter reading of Composio has it; `--clamp` takes the kinder one.
 *
 * Routes: the inventory (`GET /v1/connectors/connected`: first request of an installation, with
 * the toolkit catalog not yet cached in the process, and cached), the inventory of two apps,
 * the catalog (cold, warm), trigger types (an app with one, an app with 60), and a trigger create
 * (the types cached, and not), and one reconciliation sweep over RECONCILED triggers (the
 * broker's background check of every trigger against Composio's). The baseline, measured in the same run: what a sweep of every
 * toolkit of a Session costs at 50 a page (what an inventory that lists them all pays).
 *
 * Two brokers, started as `npm start` starts it (embedded Postgres in a temporary folder, the
 * simulator in this process), so that each has its own cold catalog; loopback only.
 */

const { values } = parseArgs({
  options: { toolkits: { type: 'string', default: '1000' }, clamp: { type: 'boolean', default: false } },
});
const TOOLKITS = Number(values.toolkits);
if (!Number.isInteger(TOOLKITS) || TOOLKITS < 6) throw new Error('--toolkits must be a whole number, at least 6');

/** The calls by endpoint: `toolkits ×2, connected_accounts`. */
const which = (requests: readonly RecordedRequest[]) => {
  const counts = new Map<string, number>();
  for (const r of requests) {
    const session = r.path.includes('/tool_router/');
    const name = session ? (r.path.endsWith('/toolkits') ? 'session toolkits' : 'session') : r.path.split('/').slice(3).join('/');
    counts.set(name, (counts.get(name) ?? 0) + 1);
  }
  return [...counts].map(([name, n]) => (n > 1 ? `${name} ×${n}` : name)).join(', ');
};

/** A count of calls, aligned in the report's column. */
const calls = (n: number) => `${String(n).padStart(3)} ${n === 1 ? 'call ' : 'calls'}`;

/** Triggers the reconciliation sweep is measured over: 100 installations with 10 each (the cap per account). */
const RECONCILE_INSTALLATIONS = 100;
const TRIGGERS_EACH = 10;

const log = createLogger('warn');
const { dataDir, cleanups, run } = await benchRun('omb-bench-composio-');
await run(main);

interface Who {
  userId: string;
  auth: { authorization: string };
}

async function main(): Promise<void> {
  process.stdout.write('Setting up: embedded Postgres, migrations, the simulator, two brokers…\n');
  const embedded = await startEmbeddedPostgres({ dataDir, logger: log, database: 'omb_bench_composio' });
  cleanups.push(() => embedded.stop());
  await applyMigrations(embedded.url, log);
  const sim = await startSimulator({
    apiKey: 'sim_bench_composio',
    logger: false,
    toolkits: TOOLKITS,
    oversizedPages: values.clamp ? 'clamp' : 'refuse',
  });
  cleanups.push(() => sim.close());
  const env = {
    DATABASE_URL: embedded.url,
    COMPOSIO_API_KEY: sim.apiKey,
    COMPOSIO_BASE_URL: sim.origin,
    COMPOSIO_WEBHOOK_SECRET: 'whsec_bench_composio',
    CONNECTOR_REQUESTS_PER_MINUTE: '10000',
    // Counting calls, not timing them: the budget must not slow the triggers made for the sweep.
    COMPOSIO_CALLS_PER_MINUTE: '1000000',
    REGISTRATIONS_PER_MINUTE: '100000',
    LOG_LEVEL: 'warn',
  };
  const first = await startChild('src/main.ts', env);
  cleanups.push(() => first.stop());
  const second = await startChild('src/main.ts', env);
  cleanups.push(() => second.stop());
  const agent = new Agent({ keepAlive: true });
  cleanups.push(async () => agent.destroy());
  process.stdout.write(
    `Ready: ${TOOLKITS.toLocaleString('en-US')} toolkits, pages above the maximum ${values.clamp ? 'clamped' : 'refused'}, loopback (Node ${process.version}).\n`,
  );

  /** The route's answer status and the Composio calls it made, as `METHOD path` (429s and 400s show). */
  const measure = async (broker: Child, who: Who, method: string, path: string, body?: unknown) => {
    const since = sim.controls.requests().length;
    const answer = await httpCall(agent, `${broker.url}${path}`, {
      method,
      headers: { ...who.auth, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const calls = sim.controls.requests().slice(since);
    return { status: answer.status, body: answer.body, calls, refused: calls.filter((c) => c.status !== null && c.status >= 400).length };
  };
  const report = (label: string, result: Awaited<ReturnType<typeof measure>>) => {
    const failed = result.refused > 0 ? `  (${result.refused} refused by Composio)` : '';
    line(label, calls(result.calls.length), `HTTP ${result.status}${failed}`, which(result.calls));
  };

  const a = await register(agent, first, sim);
  const b = await register(agent, second, sim);

  heading('GET /v1/connectors/connected');
  report('first request of an installation (makes its Session)', await measure(first, a, 'GET', '/v1/connectors/connected'));
  report('Session made, catalog cached by that request', await measure(first, a, 'GET', '/v1/connectors/connected'));
  await measure(second, b, 'GET', '/v1/connectors?services=gmail'); // b's Session, without the catalog
  report('Session made, catalog not yet cached (another process)', await measure(second, b, 'GET', '/v1/connectors/connected'));
  report('GET /v1/connectors?services=gmail,slack', await measure(second, b, 'GET', '/v1/connectors?services=gmail,slack'));

  heading('GET /v1/catalog');
  const c = await register(agent, first, sim);
  const fresh = await startChild('src/main.ts', env);
  cleanups.push(() => fresh.stop());
  const apps = (result: Awaited<ReturnType<typeof measure>>) => {
    const items = (JSON.parse(result.body) as { items?: unknown[] }).items;
    return `${(items?.length ?? 0).toLocaleString('en-US')} of ${TOOLKITS.toLocaleString('en-US')} apps`;
  };
  const cold = await measure(fresh, c, 'GET', '/v1/catalog');
  report(`cold (a fresh process), ${apps(cold)}`, cold);
  const warm = await measure(fresh, c, 'GET', '/v1/catalog');
  report(`warm (cached for ten minutes), ${apps(warm)}`, warm);

  heading('GET /v1/triggers/types');
  report('gmail (one type), cold', await measure(first, a, 'GET', '/v1/triggers/types?toolkit=gmail'));
  report(
    `${MANY_TRIGGERS_TOOLKIT} (60 types), cold`,
    await measure(first, a, 'GET', `/v1/triggers/types?toolkit=${MANY_TRIGGERS_TOOLKIT}`),
  );
  report(`${MANY_TRIGGERS_TOOLKIT}, warm`, await measure(first, a, 'GET', `/v1/triggers/types?toolkit=${MANY_TRIGGERS_TOOLKIT}`));

  heading('POST /v1/triggers');
  const account = (who: Who) => sim.controls.state().accounts.find((x) => x.user_id === who.userId && x.toolkit.slug === 'gmail')!.id;
  const create = (who: Who, automationId: string) => ({
    automationId,
    toolkit: 'gmail',
    triggerSlug: 'GMAIL_NEW_GMAIL_MESSAGE',
    connectedAccountId: account(who),
  });
  report('gmail, types cached', await measure(first, a, 'POST', '/v1/triggers', create(a, 'auto_cached')));
  report('gmail, types not cached (another process)', await measure(fresh, c, 'POST', '/v1/triggers', create(c, 'auto_cold')));

  heading(`Reconciliation: one sweep over ${(RECONCILE_INSTALLATIONS * TRIGGERS_EACH).toLocaleString('en-US')} triggers`);
  const owners: Who[] = [];
  for (let i = 0; i < RECONCILE_INSTALLATIONS; i++) owners.push(await register(agent, first, sim));
  for (let i = 0; i < owners.length; i += 10) {
    await Promise.all(
      owners.slice(i, i + 10).map(async (who, n) => {
        for (let k = 0; k < TRIGGERS_EACH; k++) {
          const made = await httpCall(agent, `${first.url}/v1/triggers`, {
            method: 'POST',
            headers: { ...who.auth, 'content-type': 'application/json' },
            // Each with its own Gmail query: the same trigger twice on one account is refused.
            body: JSON.stringify({ ...create(who, `auto_${i + n}_${k}`), filter: { from: `sender${k}@example.com` } }),
          });
          if (made.status !== 201) throw new Error(`making a trigger for the sweep: HTTP ${made.status} ${made.body}`);
        }
      }),
    );
  }
  // The sweep as a broker runs it, in this process, with the broker's settings.
  const database = openDatabase({ url: embedded.url, poolSize: 2, logger: log });
  cleanups.push(() => database.close());
  const gateway = createComposioGateway({
    apiKey: sim.apiKey,
    baseUrl: sim.origin,
    callsPerMinute: 1_000_000,
    timeoutMs: 15_000,
    logger: log,
  });
  const sweepStarted = Date.now();
  const sweep = await reconcileTriggers(
    { db: database.db, sql: database.sql, composio: gateway, log, callsPerMinute: 1_000_000, timeoutMs: 15_000 },
    { now: new Date() },
  );
  const sweepCalls = sim.controls.requests().filter((r) => r.at >= sweepStarted);
  const repairs = Object.values(sweep.repairs).reduce((a, b) => a + b, 0);
  line(
    `${sweep.seen.toLocaleString('en-US')} Composio triggers seen, ${repairs} repaired${sweep.ran ? '' : ' (DID NOT RUN)'}`,
    calls(sweepCalls.length),
    which(sweepCalls),
    `${((sweepCalls.length / Math.max(1, sweep.seen)) * 1000).toFixed(0)} per 1,000 triggers`,
  );

  heading('Baseline: a sweep of every toolkit of a Session, 50 a page');
  const session = sim.controls.state().sessions.find((s) => s.userId === a.userId)!;
  // By time: the simulator keeps only its last 1,000 requests, which the sweep's triggers have filled.
  const since = Date.now();
  let cursor: string | null = null;
  do {
    const query: string = `limit=50${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
    const page = await fetch(`${sim.origin}/api/v3.1/tool_router/session/${session.id}/toolkits?${query}`, {
      headers: { 'x-api-key': sim.apiKey },
    });
    cursor = ((await page.json()) as { next_cursor: string | null }).next_cursor;
  } while (cursor);
  line(`every toolkit (${TOOLKITS.toLocaleString('en-US')})`, calls(sim.controls.requests().filter((r) => r.at >= since).length));
}

/** A new installation on `broker`, with an ACTIVE Gmail account. */
async function register(agent: Agent, broker: Child, sim: Simulator): Promise<Who> {
  const answer = await httpCall(agent, `${broker.url}/v1/installations`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{}',
  });
  const { installationId, token } = JSON.parse(answer.body) as { installationId: string; token: string };
  const userId = composioUserIdFor(installationId);
  sim.controls.createAccount({ userId, toolkit: 'gmail', alias: 'work', status: 'ACTIVE' });
  return { userId, auth: { authorization: `Bearer ${token}` } };
}
