import { randomBytes, randomUUID } from 'node:crypto';
import { Agent } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import postgres from 'postgres';
import { parseDataKeys } from '../src/data-keys/keys.js';
import { seal } from '../src/data-keys/seal.js';
import { startEmbeddedPostgres } from '../src/db/embedded.js';
import { applyMigrations } from '../src/db/migrate.js';
import { quotaExceededEventId } from '../src/events/broker-events.js';
import { IngestBatcher } from '../src/events/intake/ingest-batcher.js';
import { jsonMemberText } from '../src/events/intake/member-text.js';
import { boundTo } from '../src/events/sealing.js';
import { composioUserIdFor, hashToken } from '../src/installations/tokens.js';
import { createLogger } from '../src/logger.js';
import { quotaDay } from '../src/plans/plan.js';
import {
  benchBrokerEnv,
  benchRun,
  type Child,
  cpuSeconds,
  fmt,
  heading,
  httpCall,
  issueWebhook,
  line,
  loadFigures,
  MEMORY_PROBE,
  machineBusySeconds,
  median,
  memoryAfterGc,
  percentile,
  residentKib,
  rounded,
  runLoad,
  startChild,
} from './lib.js';

/**
 * `npm run bench:events`: app events on this machine, each figure beside a baseline measured in
 * the same run. Everything is loopback: an embedded Postgres (default durability settings) in a
 * temporary folder, brokers started as `npm start` starts them, the load from this process.
 */

const SECRET = 'whsec_bench_0123456789abcdef';
const SENDERS = 64;
/** Rounds of the ideal ingest, the broker and the ideal announcing, each round starting with the next. */
const IDEAL_ROUNDS = 4;
/** Rounds of the broker and its two variants storing in clear, each going first once. */
const ENCRYPTION_ROUNDS = 3;
const INGEST_INSTALLATIONS = 1000;
const LATENCY_SAMPLES = 200;
const LONG_POLLS = 10_000;
const WARM_UP_POLLS = 200;
const WARMUP_MS = 1000;
/** Each server's load before any of its rounds, not measured. */
const SERVER_WARM_UP_MS = 4000;
const RUN_MS = 5000;
const METRICS_TOKEN = randomBytes(16).toString('hex');

interface Seeded {
  installationId: string;
  token: string;
  composioTriggerId: string;
}

const log = createLogger('warn');
const { dataDir, cleanups, run } = await benchRun('omb-bench-');
await run(main);

async function main(): Promise<void> {
  process.stdout.write('Setting up: embedded Postgres, migrations, installations, two brokers, a baseline server…\n');
  const embedded = await startEmbeddedPostgres({ dataDir, logger: log, database: 'omb_bench', extraFlags: ['-c', 'max_connections=300'] });
  cleanups.push(() => embedded.stop());
  await applyMigrations(embedded.url, log);
  const sql = postgres(embedded.url, { max: SENDERS, onnotice: () => {} });
  cleanups.push(() => sql.end({ timeout: 5 }));

  const installations = await seed(sql, INGEST_INSTALLATIONS + LATENCY_SAMPLES * 2 + LONG_POLLS);
  const ingestSet = installations.slice(0, INGEST_INSTALLATIONS);
  const latencySet = installations.slice(INGEST_INSTALLATIONS, INGEST_INSTALLATIONS + LATENCY_SAMPLES * 2);
  const pollSet = installations.slice(INGEST_INSTALLATIONS + LATENCY_SAMPLES * 2);

  const brokerEnv = {
    ...benchBrokerEnv(embedded.url, SECRET, METRICS_TOKEN),
    LOG_LEVEL: 'warn',
  };
  const brokerA = await startChild('src/main.ts', brokerEnv);
  await sql`create table bench_ideal_events (like events including all)`;
  await sql`create sequence bench_ideal_positions`;
  const baseline = await startChild('bench/baseline-server.ts', { COMPOSIO_WEBHOOK_SECRET: SECRET, DATABASE_URL: embedded.url });
  cleanups.push(
    () => brokerA.stop(),
    () => baseline.stop(),
  );
  const description = `a broker for ingest (pool 12), two more beside it for what encryption costs (the same storing events’ data in clear, one of them sealing it first) and a fourth for the wake-up latency, ${installations.length.toLocaleString('en-US')} installations, loopback`;
  process.stdout.write(`Ready: ${description}; load from this process (Node ${process.version}).\n`);

  // Memory is compared first, between two fresh processes, each warmed up first, while the
  // database is quiet: neither carries the heap an earlier part of the bench left it, nor
  // background work on a table the ingest filled.
  const pollBroker = await startChild('src/main.ts', { ...brokerEnv, NODE_OPTIONS: MEMORY_PROBE });
  const pollBaseline = await startChild('bench/baseline-server.ts', { COMPOSIO_WEBHOOK_SECRET: SECRET, NODE_OPTIONS: MEMORY_PROBE });
  cleanups.push(
    () => pollBroker.stop(),
    () => pollBaseline.stop(),
  );
  const held = await longPolls(pollBroker, pollBaseline, pollSet);
  const ingested = await ingest(sql, brokerA, brokerEnv, baseline, ingestSet);
  // The second broker serves only the wake-up latency: started now, it is not one more process
  // hearing every announcement while the ingest rounds run (which would cost the brokers' rounds,
  // and not the ideal's, its share of the machine).
  const brokerB = await startChild('src/main.ts', brokerEnv);
  cleanups.push(() => brokerB.stop());
  await latency(sql, embedded.url, brokerA, brokerB, latencySet);

  heading('Broker ÷ baseline in this run');
  const summary = {
    ingestRateVsIdeal: rounded(ingested.rateRatio),
    ingestRateVsIdealAnnouncing: rounded(ingested.announcingRateRatio),
    ingestRateVsInClear: rounded(ingested.clearRateRatio),
    sealingButInClearRateVsInClear: rounded(ingested.sealingOnlyRateRatio),
    ingestP99VsIdeal: rounded(ingested.p99Ratio),
    ingestP99Ms: { broker: rounded(ingested.brokerP99), ideal: rounded(ingested.idealP99) },
    sealingUsPerWebhook: rounded(ingested.sealUsPerEvent, 1),
    // Beside the ideal, the broker alone.
    brokerCpuUsPerWebhook: Math.round(ingested.brokerCpuUsPerWebhook),
    sealingShareOfBrokerCpu: rounded(ingested.sealUsPerEvent / ingested.brokerCpuUsPerWebhook, 3),
    machineCpuUsPerWebhook: {
      broker: Math.round(ingested.machineUsPerWebhook.broker),
      ideal: Math.round(ingested.machineUsPerWebhook.ideal),
    },
    idealServerCpuUsPerWebhook: Math.round(ingested.idealServerCpuUsPerWebhook),
    // The three brokers beside one another.
    encryptionCpuUsPerWebhook: {
      broker: Math.round(ingested.encryption.brokerCpuUs),
      inClear: Math.round(ingested.encryption.clearCpuUs),
      sealingButInClear: Math.round(ingested.encryption.sealingOnlyCpuUs),
    },
    encryptionMachineCpuUsPerWebhook: {
      broker: Math.round(ingested.encryption.machineUs.broker),
      inClear: Math.round(ingested.encryption.machineUs.clear),
      sealingButInClear: Math.round(ingested.encryption.machineUs.sealingOnly),
    },
    heldPollHeapKiB: { broker: rounded(held.broker.heapKibPerRequest), plainFastify: rounded(held.plain.heapKibPerRequest) },
    heldPollHeapRatio: rounded(held.broker.heapKibPerRequest / held.plain.heapKibPerRequest),
    // null when a process gave memory back between its two readings (see `residentKib`).
    heldPollKiB: { broker: residentKib(held.broker), plainFastify: residentKib(held.plain) },
    heldPollResidentRatio:
      residentKib(held.broker) === null || residentKib(held.plain) === null
        ? null
        : rounded(held.broker.kibPerRequest / held.plain.kibPerRequest),
  };
  process.stdout.write(`${JSON.stringify(summary)}\n`);
}

/** Installations with a token and one trigger each, written straight to the database. */
async function seed(sql: postgres.Sql, count: number): Promise<Seeded[]> {
  const seeded: Seeded[] = [];
  for (let i = 0; i < count; i++) {
    seeded.push({ installationId: randomUUID(), token: randomBytes(32).toString('hex'), composioTriggerId: `ti_bench_${i}` });
  }
  for (let i = 0; i < seeded.length; i += 2000) {
    const chunk = seeded.slice(i, i + 2000);
    await sql`insert into installations ${sql(
      chunk.map((s) => ({ id: s.installationId, token_hash: hashToken(s.token), composio_user_id: composioUserIdFor(s.installationId) })),
    )}`;
    await sql`insert into triggers ${sql(
      chunk.map((s, n) => ({
        id: randomUUID(),
        installation_id: s.installationId,
        automation_id: `a_bench_${i + n}`,
        toolkit: 'github',
        trigger_slug: 'GITHUB_ISSUE_ADDED_EVENT',
        connected_account_id: `ca_bench_${i + n}`,
        composio_trigger_id: s.composioTriggerId,
      })),
    )}`;
  }
  return seeded;
}

async function ingest(sql: postgres.Sql, broker: Child, brokerEnv: Record<string, string>, baseline: Child, installations: Seeded[]) {
  heading(`Signed-webhook ingest: ${SENDERS} concurrent senders, ${RUN_MS / 1000} s each after ${WARMUP_MS / 1000} s warm-up`);
  const agent = new Agent({ keepAlive: true, maxSockets: SENDERS });
  const pick = () => installations[Math.floor(Math.random() * installations.length)]!;
  type Kind = 'ideal' | 'idealAnnouncing' | 'broker' | 'clear' | 'sealingOnly';
  const servers: Partial<Record<Kind, { child: Child; url: string }>> = {
    ideal: { child: baseline, url: `${baseline.url}/ideal/webhooks/composio` },
    idealAnnouncing: { child: baseline, url: `${baseline.url}/ideal-announcing/webhooks/composio` },
    broker: { child: broker, url: `${broker.url}/v1/webhooks/composio` },
  };
  const calls: Record<Kind, number> = { ideal: 0, idealAnnouncing: 0, broker: 0, clear: 0, sealingOnly: 0 };
  const post = (url: string, installation: Seeded, kind?: Kind) => async () => {
    if (kind) calls[kind]++;
    const webhook = issueWebhook(installation, SECRET, 'bench');
    const answer = await httpCall(agent, url, { method: 'POST', headers: webhook.headers, body: webhook.body });
    return answer.status === 200 && answer.body.includes('accepted');
  };
  const load = (url: string, kind?: Kind) =>
    runLoad({ concurrency: SENDERS, warmupMs: WARMUP_MS, durationMs: RUN_MS, call: () => post(url, pick(), kind)() });

  const plain = await load(`${baseline.url}/v1/webhooks/composio`);
  line('baseline: plain Fastify route, same HMAC check, answers 200', ...loadFigures(plain));

  /**
   * Rounds of `kinds`, each round starting with the next kind, so each kind takes each place once
   * (a kind always first or last would pay more of the warm-up, or of a table grown by the rest).
   * Per kind: the rate of each round, its p99s, and the processor per webhook its server and the
   * whole machine (this load, the server, Postgres) spent, warm-ups included as their calls are.
   */
  const rounds = async (kinds: Kind[], count: number) => {
    const rates = new Map<Kind, number[]>(kinds.map((k) => [k, []]));
    const p99s = new Map<Kind, number[]>(kinds.map((k) => [k, []]));
    const machine = new Map<Kind, number>();
    const server = new Map<Kind, number>();
    const took = new Map<Kind, number>();
    // Unmeasured: a server's first seconds under load run code not yet optimised (a broker's first
    // round cost it about a third more processor per webhook than its later ones).
    for (const kind of kinds)
      await runLoad({ concurrency: SENDERS, warmupMs: 0, durationMs: SERVER_WARM_UP_MS, call: () => post(servers[kind]!.url, pick())() });
    for (let round = 0; round < count; round++) {
      const first = round % kinds.length;
      for (const kind of [...kinds.slice(first), ...kinds.slice(0, first)]) {
        const { child, url } = servers[kind]!;
        const [busyBefore, serverBefore, callsBefore] = [machineBusySeconds(), cpuSeconds(child), calls[kind]];
        const run = await load(url, kind);
        machine.set(kind, (machine.get(kind) ?? 0) + machineBusySeconds() - busyBefore);
        server.set(kind, (server.get(kind) ?? 0) + cpuSeconds(child) - serverBefore);
        took.set(kind, (took.get(kind) ?? 0) + calls[kind] - callsBefore);
        rates.get(kind)!.push(run.requests / run.seconds);
        p99s.get(kind)!.push(percentile(run.latenciesMs, 99));
        line(labels[kind], ...loadFigures(run));
      }
    }
    const perWebhook = (seconds: Map<Kind, number>, kind: Kind) => (seconds.get(kind)! * 1e6) / took.get(kind)!;
    return {
      /** The median over the rounds of `kind`'s rate ÷ `other`'s in the same round. */
      rateRatio: (kind: Kind, other: Kind) => median(rates.get(kind)!.map((rate, i) => rate / rates.get(other)![i]!)),
      p99: (kind: Kind) => median(p99s.get(kind)!),
      p99Ratio: (kind: Kind, other: Kind) => median(p99s.get(kind)!.map((p99, i) => p99 / p99s.get(other)![i]!)),
      machineUs: (kind: Kind) => perWebhook(machine, kind),
      serverUs: (kind: Kind) => perWebhook(server, kind),
      took: (kind: Kind) => took.get(kind)!,
    };
  };
  const labels: Record<Kind, string> = {
    ideal: 'ideal ingest: same HMAC check, one INSERT … SELECT committed per webhook, pool 12',
    idealAnnouncing: 'the same announcing each append in its transaction (pg_notify), as the broker must',
    broker: `broker: POST /v1/webhooks/composio (${installations.length} installations)`,
    clear: 'the same broker storing events’ data in clear',
    sealingOnly: 'the same sealing each event’s data, then storing it in clear',
  };

  // The broker against the ideal with no other broker running: every broker hears every event's
  // announcement, which the ideal (announcing nothing) would not pay for in the others' place.
  // Beside them, the ideal announcing each append as the broker must, heard by the same processes.
  const ideal = await rounds(['ideal', 'broker', 'idealAnnouncing'], IDEAL_ROUNDS);
  line(
    'broker ÷ ideal ingest (medians of the rounds)',
    `rate ${ideal.rateRatio('broker', 'ideal').toFixed(2)}×`,
    `p99 ${ideal.p99Ratio('broker', 'ideal').toFixed(2)}× (${fmt.ms(ideal.p99('broker'))} vs ${fmt.ms(ideal.p99('ideal'))})`,
  );
  line(
    'broker ÷ the ideal announcing each append (medians of the rounds)',
    `rate ${ideal.rateRatio('broker', 'idealAnnouncing').toFixed(2)}×`,
    `the ideal announcing ÷ the ideal: rate ${ideal.rateRatio('idealAnnouncing', 'ideal').toFixed(2)}×`,
  );
  line(
    'the machine’s processor per webhook (load, server, Postgres)',
    `ideal ${ideal.machineUs('ideal').toFixed(0)} µs, of which its server ${ideal.serverUs('ideal').toFixed(0)} µs`,
    `broker ${ideal.machineUs('broker').toFixed(0)} µs, of which the broker process ${ideal.serverUs('broker').toFixed(0)} µs`,
  );

  // The broker against itself storing data in clear, and sealing but storing in clear: three
  // brokers running, each hearing the others' events as they hear its own.
  const inClear = await startChild('bench/broker-in-clear.ts', brokerEnv);
  const sealingOnly = await startChild('bench/broker-in-clear.ts', { ...brokerEnv, BENCH_SEALING: 'discarded' });
  servers.clear = { child: inClear, url: `${inClear.url}/v1/webhooks/composio` };
  servers.sealingOnly = { child: sealingOnly, url: `${sealingOnly.url}/v1/webhooks/composio` };
  const stored = async () =>
    (
      await sql<{ sealed: number; clear: number }[]>`
        select count(*) filter (where sealed is not null)::int as sealed, count(*) filter (where sealed is null)::int as clear
          from events where type = 'trigger.event'`
    )[0]!;
  const before = await stored();
  const encryption = await rounds(['broker', 'clear', 'sealingOnly'], ENCRYPTION_ROUNDS);
  await Promise.all([inClear.stop(), sealingOnly.stop()]);
  // Each broker did as it says: the two in clear sealed nothing, the broker everything it took.
  const after = await stored();
  const inClearTook = encryption.took('clear') + encryption.took('sealingOnly');
  const brokerTook = ideal.took('broker') + encryption.took('broker');
  if (after.clear - before.clear < inClearTook * 0.99 || after.sealed < brokerTook * 0.99)
    throw new Error(
      `expected about ${brokerTook} events encrypted and ${inClearTook} more in clear, found ${after.sealed} and ${after.clear - before.clear}`,
    );

  const sealUsPerEvent = sealingCost(installations);
  line(
    'encryption at rest, per webhook',
    `ingest ${encryption.rateRatio('broker', 'clear').toFixed(2)}× the rate storing in clear, ${encryption.rateRatio('sealingOnly', 'clear').toFixed(2)}× sealing but storing in clear (medians of the rounds)`,
    `sealing its data ${sealUsPerEvent.toFixed(1)} µs of processor (this process, same payloads)`,
    `the broker's processor per webhook ${encryption.serverUs('broker').toFixed(0)} µs, in clear ${encryption.serverUs('clear').toFixed(0)} µs, sealing but in clear ${encryption.serverUs('sealingOnly').toFixed(0)} µs`,
    `the machine's ${encryption.machineUs('broker').toFixed(0)}, ${encryption.machineUs('clear').toFixed(0)} and ${encryption.machineUs('sealingOnly').toFixed(0)} µs`,
  );

  const hot = installations[0]!;
  const single = await runLoad({
    concurrency: SENDERS,
    warmupMs: WARMUP_MS,
    durationMs: RUN_MS,
    call: () => post(servers.broker!.url, hot)(),
  });
  line('broker: all to ONE installation (serialised on its row)', ...loadFigures(single));
  agent.destroy();

  // The write path alone: the broker's group commit driven from this process, no HTTP.
  const batcher = new IngestBatcher(sql, log);
  const payload = issueWebhook(installations[0]!, SECRET, 'bench').body;
  const data = JSON.stringify(JSON.parse(payload).data);
  const direct = await runLoad({
    concurrency: SENDERS,
    warmupMs: WARMUP_MS,
    durationMs: RUN_MS,
    call: async () => {
      const installation = pick();
      const now = new Date();
      const row = await batcher.write({
        eventId: `direct_${randomUUID()}`,
        triggerId: installation.composioTriggerId,
        userId: composioUserIdFor(installation.installationId),
        dataJson: data,
        receivedAt: now.toISOString(),
        day: quotaDay(now).day,
        resetsAt: quotaDay(now).resetsAt.toISOString(),
        quotaEventId: quotaExceededEventId(quotaDay(now).day),
        quotaStandard: 10_000_000,
        quotaPaid: 10_000_000,
      });
      return row.outcome === 'accepted';
    },
  });
  line('broker write path alone (same group commit, no HTTP)', ...loadFigures(direct));

  await sql`create table bench_events (like events including all)`;
  let position = 0;
  const insert = await runLoad({
    concurrency: SENDERS,
    warmupMs: WARMUP_MS,
    durationMs: RUN_MS,
    call: async () => {
      const installation = pick();
      await sql`insert into bench_events (installation_id, position, id, type, trigger_id, automation_id, toolkit, trigger_slug,
                                          connected_account_id, received_at, data)
                values (${installation.installationId}, ${++position}, ${`ins_${position}_${randomUUID()}`}, 'trigger.event',
                        ${randomUUID()}, 'a_bench', 'github', 'GITHUB_ISSUE_ADDED_EVENT', 'ca_bench', now(), ${data}::text::jsonb)`;
      return true;
    },
  });
  line(`baseline: bare Postgres INSERT of the same row, ${SENDERS} connections`, ...loadFigures(insert));
  return {
    rateRatio: ideal.rateRatio('broker', 'ideal'),
    announcingRateRatio: ideal.rateRatio('broker', 'idealAnnouncing'),
    p99Ratio: ideal.p99Ratio('broker', 'ideal'),
    brokerP99: ideal.p99('broker'),
    idealP99: ideal.p99('ideal'),
    machineUsPerWebhook: { broker: ideal.machineUs('broker'), ideal: ideal.machineUs('ideal') },
    brokerCpuUsPerWebhook: ideal.serverUs('broker'),
    idealServerCpuUsPerWebhook: ideal.serverUs('ideal'),
    clearRateRatio: encryption.rateRatio('broker', 'clear'),
    sealingOnlyRateRatio: encryption.rateRatio('sealingOnly', 'clear'),
    sealUsPerEvent,
    encryption: {
      brokerCpuUs: encryption.serverUs('broker'),
      clearCpuUs: encryption.serverUs('clear'),
      sealingOnlyCpuUs: encryption.serverUs('sealingOnly'),
      machineUs: {
        broker: encryption.machineUs('broker'),
        clear: encryption.machineUs('clear'),
        sealingOnly: encryption.machineUs('sealingOnly'),
      },
    },
  };
}

/**
 * What encrypting one webhook's data costs the broker, in microseconds of processor: what
 * src/events/sealing.ts `sealFor` does (take the `data` member's text out of the delivery, seal
 * it bound to its row, base64), over the bench's own deliveries, under a key of its own.
 */
function sealingCost(installations: Seeded[]): number {
  const parsed = parseDataKeys(`bench:${randomBytes(32).toString('base64')}`, 'bench');
  if ('problems' in parsed) throw new Error(parsed.problems.join('; '));
  const deliveries = installations
    .slice(0, 200)
    .map((installation) => ({ installation, body: issueWebhook(installation, SECRET, 'bench').body }));
  const sealAll = () => {
    for (const { installation, body } of deliveries) {
      const data = jsonMemberText(body, 'data')!;
      seal(parsed.keys, data, boundTo(composioUserIdFor(installation.installationId), 'bench')).toString('base64');
    }
  };
  for (let i = 0; i < 10; i++) sealAll();
  const rounds = 50;
  const before = process.cpuUsage();
  for (let i = 0; i < rounds; i++) sealAll();
  const used = process.cpuUsage(before);
  return (used.user + used.system) / (rounds * deliveries.length);
}

async function latency(sql: postgres.Sql, databaseUrl: string, a: Child, b: Child, installations: Seeded[]): Promise<void> {
  heading(`Webhook accepted → waiting poll answered (${LATENCY_SAMPLES} samples each, one at a time)`);
  const agent = new Agent({ keepAlive: true, maxSockets: 8 });

  async function sample(pollOn: Child, sendTo: Child, installation: Seeded) {
    const auth = { authorization: `Bearer ${installation.token}` };
    let answeredAt = 0;
    const poll = httpCall(agent, `${pollOn.url}/v1/events?wait=25`, { headers: auth }).then((answer) => {
      answeredAt = performance.now();
      return answer;
    });
    await sleep(15); // let the poll reach the waiting room
    const webhook = issueWebhook(installation, SECRET, 'bench');
    const sentAt = performance.now();
    const accepted = await httpCall(agent, `${sendTo.url}/v1/webhooks/composio`, {
      method: 'POST',
      headers: webhook.headers,
      body: webhook.body,
    });
    const acceptedAt = performance.now();
    const answer = await poll;
    if (accepted.status !== 200 || !answer.body.includes(webhook.headers['webhook-id']!))
      throw new Error(`latency sample failed: ${answer.body}`);
    return { sentToAnswered: answeredAt - sentAt, acceptedToAnswered: answeredAt - acceptedAt, webhook: acceptedAt - sentAt };
  }

  for (const [label, pollOn, offset] of [
    ['same broker (woken by its own announcement)', a, 0],
    ['poll on broker B, webhook to A (via LISTEN)', b, LATENCY_SAMPLES],
  ] as const) {
    const samples = [];
    for (let i = 0; i < LATENCY_SAMPLES; i++) samples.push(await sample(pollOn, a, installations[offset + i]!));
    const sent = samples.map((s) => s.sentToAnswered);
    const accepted = samples.map((s) => s.acceptedToAnswered);
    const webhookRtt = samples.map((s) => s.webhook);
    line(
      label,
      `webhook 200 → poll answered p50 ${fmt.ms(percentile(accepted, 50))}, p99 ${fmt.ms(percentile(accepted, 99))}`,
      `webhook sent → poll answered p50 ${fmt.ms(percentile(sent, 50))}, p99 ${fmt.ms(percentile(sent, 99))}`,
      `(the webhook's own round trip p50 ${fmt.ms(percentile(webhookRtt, 50))})`,
    );
  }
  agent.destroy();

  // Baseline: Postgres alone, a committed NOTIFY to a LISTEN on another connection.
  const listener = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  const waiting = new Map<string, () => void>();
  await listener.listen('bench_baseline', (payload) => waiting.get(payload)?.());
  const notifyOnce = async (payload: string) => {
    const received = new Promise<void>((resolve) => waiting.set(payload, resolve));
    const sentAt = performance.now();
    await sql`select pg_notify('bench_baseline', ${payload})`;
    await received;
    return performance.now() - sentAt;
  };
  await notifyOnce('warm-up');
  const baseline: number[] = [];
  for (let i = 0; i < LATENCY_SAMPLES; i++) baseline.push(await notifyOnce(String(i)));
  await listener.end({ timeout: 5 });
  line(
    'baseline: Postgres NOTIFY sent → LISTEN received (with its commit)',
    `p50 ${fmt.ms(percentile(baseline, 50))}, p99 ${fmt.ms(percentile(baseline, 99))}`,
  );
}

async function longPolls(broker: Child, baseline: Child, installations: Seeded[]) {
  heading(`Concurrently held long polls (target ${LONG_POLLS.toLocaleString('en-US')} on one broker process)`);
  // Warm-up: every code path of a poll runs (and is compiled) before anything is measured.
  const warm = new Agent({ keepAlive: false, maxSockets: Number.POSITIVE_INFINITY });
  await Promise.all(
    installations
      .slice(0, WARM_UP_POLLS)
      .map((installation) =>
        httpCall(warm, `${broker.url}/v1/events?wait=0`, { headers: { authorization: `Bearer ${installation.token}` } }),
      ),
  );
  const warmHeld = Array.from({ length: WARM_UP_POLLS }, () => httpCall(warm, `${baseline.url}/hold`));
  while ((await fetch(`${baseline.url}/held`).then((r) => r.json() as Promise<{ held: number }>)).held < WARM_UP_POLLS) await sleep(50);
  await fetch(`${baseline.url}/release`, { method: 'POST' });
  await Promise.all(warmHeld);
  warm.destroy();

  const brokerFigures = await hold({
    server: broker,
    count: installations.length,
    request: (agent, i) =>
      httpCall(agent, `${broker.url}/v1/events?wait=25`, { headers: { authorization: `Bearer ${installations[i]!.token}` } }),
    heldNow: async () => {
      const metrics = await fetch(`${broker.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } }).then((r) =>
        r.ok ? r.text() : '',
      );
      const match = /^omb_long_polls_waiting (\d+)/m.exec(metrics);
      return match ? Number(match[1]) : Number.NaN;
    },
    // Shutdown answers every waiting poll at once (empty), so clients reconnect elsewhere.
    release: () => broker.stop(),
  });
  line(
    'broker: GET /v1/events?wait=25 held',
    `${fmt.int(brokerFigures.held)} polls`,
    `${fmt.kib(brokerFigures.heapKibPerRequest)} JS heap each, ${residentText(brokerFigures)}, after a compacting GC`,
    `GET /health meanwhile (reads the database) p50 ${fmt.ms(brokerFigures.otherP50)}, p99 ${fmt.ms(brokerFigures.otherP99)}`,
    `SIGTERM → all answered ${fmt.ms(brokerFigures.releaseMs)}`,
  );

  const plain = await hold({
    server: baseline,
    count: installations.length,
    request: (agent) => httpCall(agent, `${baseline.url}/hold`),
    heldNow: async () => (await fetch(`${baseline.url}/held`).then((r) => r.json() as Promise<{ held: number }>)).held,
    release: () => fetch(`${baseline.url}/release`, { method: 'POST' }).then(() => undefined),
  });
  line(
    'baseline: plain Fastify route holding idle requests',
    `${fmt.int(plain.held)} requests`,
    `${fmt.kib(plain.heapKibPerRequest)} JS heap each, ${residentText(plain)}, after a compacting GC`,
    `GET /health meanwhile p50 ${fmt.ms(plain.otherP50)}, p99 ${fmt.ms(plain.otherP99)}`,
    `release all → answered ${fmt.ms(plain.releaseMs)}`,
  );
  return { broker: brokerFigures, plain };
}

function residentText(figures: { kibPerRequest: number; heapKibPerRequest: number }): string {
  const resident = residentKib(figures);
  return resident === null
    ? `resident not measurable this run (${fmt.kib(figures.kibPerRequest)}: memory given back between the readings)`
    : `${fmt.kib(resident)} resident`;
}

/**
 * Opens `count` requests that the server holds, each on its own socket (in waves, so the listen
 * backlog never overflows), then measures what holding them costs. Memory is read twice, once a
 * fifth of them are held and once all are: the cost per request is the slope between the two, so
 * what the first arrivals set up once (a heap grown for the arrival rate, buffers kept by the
 * allocator) is not spread over the requests.
 */
async function hold(options: {
  server: Child;
  count: number;
  request: (agent: Agent, i: number) => Promise<{ status: number }>;
  heldNow: () => Promise<number>;
  release: () => Promise<void>;
}) {
  const agent = new Agent({ keepAlive: false, maxSockets: Number.POSITIVE_INFINITY });
  let answered = 0;
  let lastAnsweredAt = 0;
  const pending: Array<Promise<void>> = [];
  const open = async (from: number, to: number) => {
    for (let i = from; i < to; i++) {
      pending.push(
        options.request(agent, i).then(
          () => {
            answered++;
            lastAnsweredAt = performance.now();
          },
          () => {
            answered++;
            lastAnsweredAt = performance.now();
          },
        ),
      );
      if (i % 500 === 499) await sleep(50);
    }
    let held = 0;
    const deadline = Date.now() + 15_000;
    while (Date.now() < deadline) {
      held = await options.heldNow();
      if (held >= to) break;
      await sleep(100);
    }
    // Let the arrival's own work (reads, freed buffers) wind down before reading memory.
    await sleep(1_000);
    return { held, memory: await memoryAfterGc(options.server) };
  };
  const first = await open(0, Math.floor(options.count / 5));
  const all = await open(Math.floor(options.count / 5), options.count);
  const { held } = all;
  const heldAnsweredEarly = answered;
  const added = Math.max(1, all.held - first.held);
  const [before, after] = [first.memory, all.memory];

  const other = new Agent({ keepAlive: true, maxSockets: 1 });
  const times: number[] = [];
  for (let i = 0; i < 200; i++) {
    const t0 = performance.now();
    await httpCall(other, `${options.server.url}/health`);
    times.push(performance.now() - t0);
  }
  other.destroy();

  const releasedAt = performance.now();
  await options.release();
  await Promise.all(pending);
  agent.destroy();
  if (heldAnsweredEarly > 0) process.stdout.write(`  (note: ${heldAnsweredEarly} requests were answered before the release)\n`);
  return {
    held,
    // Anonymous resident memory, less the young generation (see bench/memory-probe.mjs).
    kibPerRequest: (after.anonymous - after.youngGeneration - (before.anonymous - before.youngGeneration)) / 1024 / added,
    heapKibPerRequest: (after.heapUsed + after.external - before.heapUsed - before.external) / 1024 / added,
    otherP50: percentile(times, 50),
    otherP99: percentile(times, 99),
    releaseMs: lastAnsweredAt - releasedAt,
  };
}
