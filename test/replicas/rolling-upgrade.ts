import { existsSync } from 'node:fs';
import { readdir, readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type EmbeddedDatabase, startEmbeddedPostgres } from '../../src/db/embedded.js';
import { FUNCTIONS_FOLDER } from '../../src/db/migrate.js';
import { decodeCursor } from '../../src/events/queue/cursor.js';
import { createLogger } from '../../src/logger.js';
import { BROKER_ENV, insertTrigger, signed, type TestTrigger, triggerMessage } from '../events/helpers.js';
import { type BrokerProcess, startBroker } from '../support/broker-process.js';
import { initialisedFolder } from '../support/data-folder.js';
import { registerOver, until } from '../support/http.js';
import { checkOutRelease, type ReleaseCheckout } from '../support/release-checkout.js';
import { previousRelease, type Release } from '../support/releases.js';

/**
 * A rolling upgrade from the previous release (CHANGELOG.md, checked out of this repository's
 * history) to this one, on one database, under a steady load of signed webhooks and consumers
 * long-polling with their cursors. Each broker leaves as a load balancer would take it out: no new
 * requests sent to it, the ones it holds answered, then SIGTERM. Nothing may be refused on the
 * way: every webhook is answered 2xx, every poll 200 with well-formed events and an advancing
 * cursor, and every accepted webhook is delivered exactly once, in order, whichever version took
 * it and whichever served the poll.
 *
 * Both orders, in one roll under one load: the previous release migrates first and this one starts
 * (and migrates) beside it; then, while both serve, a previous-release broker starts on the
 * database this release migrated (a replica of the old version restarting mid-roll, or a roll
 * back); the first previous-release broker leaves, this release serves alone a moment, the second
 * joins it and leaves too. Starting on this release's database, the previous release applies its
 * function files again wherever their text differs from the ledger, and forgets the ledger rows of
 * files it does not have: 0.1.0 has no guard against that, so it would put its definitions back
 * under the running new brokers. Of the files both releases have it applies only those this
 * release changed in place, each listed in CHANGED_IN_PLACE with why the previous text is safe
 * under this release's brokers: any other change in place fails the test, and the previous
 * release's start is the hazard to deal with (a new function beside the old one, as src/README.md
 * says of changed signatures). The definitions Postgres holds of every other function this
 * release has must be the ones it left: the test compares them before and after. The files this
 * release removed (their functions dropped by a contract step, which drops only what the previous
 * release no longer calls) the previous release applies again: it puts back functions nobody
 * calls, and this release's next start forgets their ledger rows and starts as usual.
 */

/**
 * Function files this release changed in place, and why the previous release's text, which its
 * start puts back, gives this release's brokers the same answers until their next start applies
 * this release's again.
 */
const CHANGED_IN_PLACE: Readonly<Record<string, string>> = {
  // Each now calls its `_sealed` successor with no sealed data; this release's brokers call those
  // successors themselves, which the previous release's start leaves alone.
  omb_append_events: 'a call of omb_append_events_sealed with no sealed data: the previous text writes the same rows',
  omb_ingest_trigger_alone:
    'a call of omb_ingest_trigger_alone_sealed with no sealed data: the previous text answers the same, and only the previous release calls it',
  omb_ingest_trigger_batch:
    'a call of omb_ingest_trigger_batch_sealed, given messages without sealed data: the previous text answers the same (checking for redeliveries once per message, more slowly), and only the previous release calls it',
};

const INSTALLATIONS = 3;
/** Each installation's webhooks are sent one after another, this far apart: one every 40 ms in all. */
const SEND_EVERY_MS = 120;
/** Seconds a consumer's poll may wait: long enough that polls really wait when the load pauses. */
const POLL_WAIT_S = 5;
/** Requests each broker must have answered while both serve, before the one leaving is stopped. */
const SERVED_TOGETHER = 30;
/** Webhooks sent after the one leaving stopped, to the one staying. */
const SENT_AFTER = 20;

/** Which broker: the previous release's first, this release's, and the previous release's started on this one's database. */
type Name = 'previous' | 'head' | 'previous again';

interface Member {
  readonly name: Name;
  readonly broker: BrokerProcess;
  /** Webhooks sent to it and not answered yet. */
  webhooksInFlight: number;
}

interface Installation {
  readonly installationId: string;
  readonly auth: { authorization: string };
  readonly trigger: TestTrigger;
}

interface Answer {
  readonly name: Name;
  /** 0: no HTTP answer at all (refused or cut). */
  readonly status: number;
}

/** How this release's brokers reach the database in one run of the scenario. */
export interface RollingUpgradeVariant {
  /** Said in the scenario's title: the way this release's brokers reach Postgres. */
  readonly via: string;
  /**
   * This release's brokers' database settings, given Postgres's URL, and how to stop what stands
   * between; the previous release's brokers always reach Postgres directly. Unset: directly too.
   */
  readonly headDatabase?: (postgresUrl: string) => Promise<{ env: Record<string, string>; stop(): Promise<void> }>;
}

/** The scenario above, as a `describe` of its own (the test files call it once each). */
export function describeRollingUpgrade(variant: RollingUpgradeVariant): void {
  let release: Release & { commit: string };
  let checkout: ReleaseCheckout;
  let dataDir: string;
  let pg: EmbeddedDatabase;
  /** The test's own connection: triggers, and the database functions as Postgres holds them. */
  let db: postgres.Sql;
  let env: Record<string, string>;
  /** This release's brokers' environment: `env`, or through what `variant.headDatabase` put between. */
  let headEnv: Record<string, string>;
  let between: { stop(): Promise<void> } | undefined;
  const started: BrokerProcess[] = [];

  beforeAll(async () => {
    release = await previousRelease();
    dataDir = await initialisedFolder('omb-rolling-');
    // Side by side; each kept as soon as it is there, so that afterAll removes it whatever else failed.
    const ready = await Promise.allSettled([
      checkOutRelease(release.commit).then((made) => (checkout = made)),
      startEmbeddedPostgres({ dataDir, logger: createLogger('silent'), extraFlags: ['-c', 'fsync=off'] }).then((server) => (pg = server)),
    ]);
    for (const outcome of ready) if (outcome.status === 'rejected') throw outcome.reason;
    db = postgres(pg.url, { max: 2, onnotice: () => {} });
    env = { ...BROKER_ENV, DATABASE_URL: pg.url, QUOTA_STANDARD: '1000000', REGISTRATIONS_PER_MINUTE: '1000' };
    headEnv = env;
    if (variant.headDatabase) {
      const made = await variant.headDatabase(pg.url);
      between = made;
      headEnv = { ...env, ...made.env };
    }
  }, 120_000);

  afterAll(async () => {
    await Promise.all(started.map((broker) => broker.stop('SIGKILL')));
    await db?.end({ timeout: 1 });
    await between?.stop();
    await pg?.stop();
    await checkout?.remove();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  }, 60_000);

  async function start(version: 'previous' | 'head'): Promise<BrokerProcess> {
    const startedAt = performance.now();
    // Generous: on a crowded machine a start has taken over 30 s.
    const options = { timeoutMs: 90_000, ...(version === 'previous' ? { cwd: checkout.dir } : {}) };
    const broker = await startBroker(version === 'previous' ? env : headEnv, options);
    console.info(
      `${version === 'previous' ? `previous ${release.version}` : 'head'} listening after ${Math.round(performance.now() - startedAt)} ms`,
    );
    started.push(broker);
    return broker;
  }

  /** What the broker's start said it applied: `functionFilesApplied` of its "migrations applied" line. */
  function functionFilesApplied(broker: BrokerProcess): number {
    const line = broker
      .output()
      .split('\n')
      .find((text) => text.includes('"msg":"migrations applied"'));
    if (!line) throw new Error(`no "migrations applied" line:\n${broker.output()}`);
    return (JSON.parse(line) as { functionFilesApplied: number }).functionFilesApplied;
  }

  /** The database functions as Postgres holds them, and the ledger of the files applied. */
  async function functionDefinitions() {
    const functions = await db<{ name: string; arguments: string; result: string; definition: string }[]>`
    select p.proname as name, pg_get_function_identity_arguments(p.oid) as arguments,
           pg_get_function_result(p.oid) as result, md5(pg_get_functiondef(p.oid)) as definition
      from pg_proc p join pg_namespace n on n.oid = p.pronamespace
     where n.nspname = 'public' and p.proname like 'omb\\_%'
     order by 1, 2`;
    const ledger = await db<{ functionName: string; sha256: string }[]>`
    select function_name as "functionName", sha256 from applied_functions order by 1`;
    return { functions: [...functions], ledger: [...ledger] };
  }

  type FunctionDefinitions = Awaited<ReturnType<typeof functionDefinitions>>;

  /** The function files the previous release has and this one removed: functions a contract step dropped. */
  async function removedFunctionFiles(): Promise<string[]> {
    const names = async (folder: string) =>
      (await readdir(folder)).filter((file) => file.endsWith('.sql')).map((file) => path.basename(file, '.sql'));
    const kept = new Set(await names(FUNCTIONS_FOLDER));
    return (await names(path.join(checkout.dir, 'migrations/functions'))).filter((name) => !kept.has(name)).sort();
  }

  /** The function files both releases have, with texts that differ: the previous release applies its own at its start. */
  async function changedFunctionFiles(): Promise<string[]> {
    const theirs = path.join(checkout.dir, 'migrations/functions');
    const shared = (await readdir(FUNCTIONS_FOLDER)).filter((file) => file.endsWith('.sql') && existsSync(path.join(theirs, file)));
    const changed: string[] = [];
    for (const file of shared) {
      const [ours, previous] = await Promise.all([
        readFile(path.join(FUNCTIONS_FOLDER, file), 'utf8'),
        readFile(path.join(theirs, file), 'utf8'),
      ]);
      if (ours !== previous) changed.push(path.basename(file, '.sql'));
    }
    return changed.sort();
  }

  /** The function files this release added: the previous release does not have them, and forgets their ledger rows at its start. */
  async function addedFunctionFiles(): Promise<string[]> {
    const names = async (folder: string) =>
      (await readdir(folder)).filter((file) => file.endsWith('.sql')).map((file) => path.basename(file, '.sql'));
    const theirs = new Set(await names(path.join(checkout.dir, 'migrations/functions')));
    return (await names(FUNCTIONS_FOLDER)).filter((name) => !theirs.has(name)).sort();
  }

  /** The functions and ledger rows of all but `names`. */
  function leavingOut(definitions: FunctionDefinitions, names: readonly string[]): FunctionDefinitions {
    return {
      functions: definitions.functions.filter((f) => !names.includes(f.name)),
      ledger: definitions.ledger.filter((row) => !names.includes(row.functionName)),
    };
  }

  /**
   * The brokers taking requests, in turn: webhooks alternate between them, and so do polls, each
   * kind in a turn of its own. One turn for both could lock in step (a webhook, then the poll it
   * wakes, then the next webhook…) and send every poll to the same broker. `leave` takes one out as
   * a load balancer would, waits for the webhooks it holds to be answered, then stops it with
   * SIGTERM (its waiting polls are answered at once, empty).
   */
  function rotation() {
    const members: Member[] = [];
    const turns = { webhook: 0, poll: 0 };
    return {
      join(name: Name, broker: BrokerProcess) {
        members.push({ name, broker, webhooksInFlight: 0 });
      },
      next(kind: keyof typeof turns): Member {
        const member = members[turns[kind] % members.length]!;
        turns[kind] += 1;
        return member;
      },
      async leave(broker: BrokerProcess): Promise<number | null> {
        const index = members.findIndex((member) => member.broker === broker);
        const [member] = members.splice(index, 1);
        await until(() => member!.webhooksInFlight === 0, 10_000, 'the webhooks it holds answered');
        return broker.stop('SIGTERM');
      },
    };
  }

  async function installations(on: BrokerProcess): Promise<Installation[]> {
    return Promise.all(
      Array.from({ length: INSTALLATIONS }, async () => {
        const { installationId, auth } = await registerOver(on.url);
        return { installationId, auth, trigger: await insertTrigger({ sql: db }, installationId) };
      }),
    );
  }

  /**
   * The load: per installation, one sender posting its webhooks one after another (so their order
   * in the queue is their sequence), and one consumer long-polling with its cursor, each request to
   * the next broker in the rotation. What went wrong is kept in `problems`, asserted at the end.
   */
  function startLoad(brokers: ReturnType<typeof rotation>, of: Installation[]) {
    const webhooks: Answer[] = [];
    const polls: Answer[] = [];
    const problems: string[] = [];
    /** Per installation: the webhooks answered 2xx, in the order sent. */
    const accepted = of.map(() => [] as Array<{ id: string; seq: number }>);
    /** Per installation: the events its consumer received, in the order received. */
    const received = of.map(() => [] as Array<{ id: string; seq: number }>);
    let sending = true;
    let consuming = true;
    const abort = new AbortController();

    const sender = async (index: number) => {
      const { trigger } = of[index]!;
      for (let seq = 0; sending; seq += 1) {
        const next = new Promise((resolve) => setTimeout(resolve, SEND_EVERY_MS));
        const member = brokers.next('webhook');
        const webhook = signed(triggerMessage(trigger, { seq }));
        member.webhooksInFlight += 1;
        let status = 0;
        try {
          const response = await fetch(`${member.broker.url}/v1/webhooks/composio`, {
            method: 'POST',
            headers: webhook.headers,
            body: webhook.body,
          });
          status = response.status;
          const body = (await response.json().catch(() => undefined)) as { outcome?: string } | undefined;
          if (status >= 200 && status < 300) {
            if (body?.outcome === 'accepted') accepted[index]!.push({ id: webhook.id, seq });
            else problems.push(`webhook ${webhook.id} on ${member.name}: ${status} ${JSON.stringify(body)}`);
          }
        } catch {
          // No answer: counted as status 0.
        } finally {
          member.webhooksInFlight -= 1;
        }
        webhooks.push({ name: member.name, status });
        await next;
      }
    };

    const consumer = async (index: number) => {
      const { installationId, auth, trigger } = of[index]!;
      let cursor: string | undefined;
      let position: number | undefined;
      while (consuming) {
        const member = brokers.next('poll');
        const query = new URLSearchParams({ limit: '100', wait: String(POLL_WAIT_S), ...(cursor ? { cursor } : {}) });
        let status = 0;
        let batch: { events: Array<Record<string, any>>; cursor: string } | undefined;
        try {
          const response = await fetch(`${member.broker.url}/v1/events?${query}`, { headers: auth, signal: abort.signal });
          status = response.status;
          batch = status === 200 ? ((await response.json()) as typeof batch) : undefined;
        } catch {
          if (!consuming) return;
        }
        polls.push({ name: member.name, status });
        if (!batch) continue;
        const at = decodeCursor(installationId, batch.cursor);
        const advanced = batch.events.length > 0 ? position === undefined || at > position : position === undefined || at === position;
        if (!advanced) problems.push(`poll on ${member.name}: cursor at ${at} after ${position} with ${batch.events.length} events`);
        for (const event of batch.events) {
          const wellFormed =
            typeof event.id === 'string' &&
            event.type === 'trigger.event' &&
            event.triggerId === trigger.id &&
            event.automationId === trigger.automationId &&
            event.toolkit === trigger.toolkit &&
            event.triggerSlug === trigger.triggerSlug &&
            event.connectedAccountId === trigger.connectedAccountId &&
            !Number.isNaN(Date.parse(event.receivedAt)) &&
            Number.isInteger(event.data?.seq) &&
            Object.keys(event.data).length === 1;
          if (!wellFormed) problems.push(`poll on ${member.name}: ${JSON.stringify(event)}`);
          received[index]!.push({ id: event.id, seq: event.data?.seq });
        }
        cursor = batch.cursor;
        position = at;
      }
    };

    const sending$ = Promise.all(of.map((_, index) => sender(index)));
    const consuming$ = Promise.all(of.map((_, index) => consumer(index)));
    const count = (answers: Answer[], name: Name) => answers.filter((answer) => answer.name === name).length;

    return {
      webhooks,
      polls,
      served: (name: Name) => Math.min(count(webhooks, name), count(polls, name)),
      /** Stops sending; once every accepted webhook was received (or 15 s passed), stops the consumers. */
      async stop() {
        sending = false;
        await sending$;
        const total = () => accepted.reduce((sum, list) => sum + list.length, 0);
        const got = () => received.reduce((sum, list) => sum + list.length, 0);
        await until(() => got() >= total(), 15_000, 'every accepted webhook received').catch(() => {});
        consuming = false;
        abort.abort();
        await consuming$;
        return { accepted, received, problems };
      },
    };
  }

  /** Status counts per broker, e.g. `{ previous: { 200: 93 }, head: { 200: 120 } }`. */
  function byStatus(answers: Answer[]): Record<string, Record<number, number>> {
    const counts: Record<string, Record<number, number>> = {};
    for (const { name, status } of answers) {
      counts[name] ??= {};
      counts[name]![status] = (counts[name]![status] ?? 0) + 1;
    }
    return counts;
  }

  describe(`a rolling upgrade from the previous release to this one, ${variant.via}`, () => {
    it('refuses no webhook or poll and delivers every accepted webhook once, in order, in both orders', async () => {
      // The previous release starts first and migrates the database to its schema.
      const previous = await start('previous');
      expect(functionFilesApplied(previous)).toBeGreaterThan(0);
      const previousDefinitions = await functionDefinitions();
      const brokers = rotation();
      brokers.join('previous', previous);
      const load = startLoad(brokers, await installations(previous));
      await until(() => load.served('previous') >= 5, 15_000, 'the load under way on the previous release');

      // This release starts and migrates while the previous one serves, and joins it.
      const head = await start('head');
      brokers.join('head', head);
      const migrated = await functionDefinitions();

      // The other order, started now so that its start overlaps the two serving together: a
      // previous-release broker on the database this release migrated. It finds its migrations
      // applied and every function file both releases have as it has it: of those it applies none,
      // and the functions stay this release's. Those whose files this release removed it puts back.
      const again = start('previous');
      await until(() => load.served('head') >= SERVED_TOGETHER, 30_000, 'both serving');
      const previousAgain = await again;
      console.info(`previous ${release.version} on this release's database applied ${functionFilesApplied(previousAgain)} function files`);
      const afterItsStart = await functionDefinitions();

      // The previous release leaves; this one serves alone a moment.
      expect(await brokers.leave(previous)).toBe(0);
      const alone = load.webhooks.length;
      await until(() => load.webhooks.length >= alone + SENT_AFTER, 15_000, 'the load going on after it left');

      // The previous release, started on this one's database, joins this one, then leaves.
      brokers.join('previous again', previousAgain);
      await until(() => load.served('previous again') >= SERVED_TOGETHER, 20_000, 'both serving again');
      expect(await brokers.leave(previousAgain)).toBe(0);
      const aloneAgain = load.webhooks.length;
      await until(() => load.webhooks.length >= aloneAgain + SENT_AFTER, 15_000, 'the load going on after it left again');
      const result = await load.stop();

      const webhooks = byStatus(load.webhooks);
      const polls = byStatus(load.polls);
      console.info(`previous ${release.version} → head: webhooks ${JSON.stringify(webhooks)}, polls ${JSON.stringify(polls)}`);
      // Counted by broker and status: `{}` when nothing was refused.
      const refusedWebhooks = byStatus(load.webhooks.filter((answer) => answer.status < 200 || answer.status >= 300));
      expect(refusedWebhooks, 'every webhook answered 2xx').toEqual({});
      expect(byStatus(load.polls.filter((answer) => answer.status !== 200)), 'every poll answered 200').toEqual({});
      expect(result.problems).toEqual([]);
      // Each installation received exactly what was accepted for it, once, in the order sent.
      expect(result.received).toEqual(result.accepted);
      // Each broker took webhooks and served polls.
      for (const name of ['previous', 'head', 'previous again'] as const) {
        expect(webhooks[name]?.[200] ?? 0, name).toBeGreaterThan(0);
        expect(polls[name]?.[200] ?? 0, name).toBeGreaterThan(0);
      }
      const removed = await removedFunctionFiles();
      expect(
        migrated.functions.filter((f) => removed.includes(f.name)),
        'the functions this release dropped',
      ).toEqual([]);
      const changed = await changedFunctionFiles();
      expect(changed, 'the function files this release changed in place').toEqual(Object.keys(CHANGED_IN_PLACE).sort());
      expect(functionFilesApplied(previousAgain), 'the function files the previous release applied again').toBe(
        removed.length + changed.length,
      );
      expect([...new Set(afterItsStart.functions.map((f) => f.name))].filter((name) => removed.includes(name))).toEqual(removed);
      // Those changed in place hold the previous release's text again, as before this release migrated.
      const only = (definitions: FunctionDefinitions, names: readonly string[]) =>
        definitions.functions.filter((f) => names.includes(f.name));
      expect(only(afterItsStart, changed), 'the functions changed in place').toEqual(only(previousDefinitions, changed));
      // The functions this release added stay as they were; the previous release, which does not
      // have their files, forgets their ledger rows (0.1.0 has no guard, see src/db/functions.ts).
      const added = await addedFunctionFiles();
      expect(
        leavingOut(afterItsStart, [...removed, ...changed]),
        "every other function after the previous release started on this one's database",
      ).toEqual(
        leavingOut({ functions: migrated.functions, ledger: migrated.ledger.filter((row) => !added.includes(row.functionName)) }, changed),
      );
      expect(await functionDefinitions(), 'the functions at the end').toEqual(afterItsStart);

      // This release starts again after it: it forgets the ledger rows of the files it removed (the
      // functions the previous release put back stay, called by nobody) and applies again only the
      // files it added, whose rows the previous release forgot (their text is what Postgres holds).
      const headAgain = await start('head');
      expect(functionFilesApplied(headAgain)).toBe(added.length + changed.length);
      expect(await headAgain.stop('SIGTERM')).toBe(0);
      const afterHeadAgain = await functionDefinitions();
      expect(afterHeadAgain.ledger, 'the ledger after this release started again').toEqual(migrated.ledger);
      expect(leavingOut(afterHeadAgain, changed).functions).toEqual(leavingOut(afterItsStart, changed).functions);
      expect(only(afterHeadAgain, changed), 'the functions changed in place, this release’s again').toEqual(only(migrated, changed));
    }, 180_000);
  });
}
