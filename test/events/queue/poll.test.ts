import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppError } from '../../../src/errors.js';
import { EventHub } from '../../../src/events/queue/hub.js';
import { type PollResult, pollEvents } from '../../../src/events/queue/poll.js';
import { register } from '../../support/app.js';
import { until } from '../../support/http.js';
import { buildEventsApp, countingQueueReads, type EventsTestApp, insertTrigger, sendAccepted } from '../helpers.js';

/**
 * One long poll against the real queue, with a waiting room of the test's own: nothing wakes it
 * but what the test does, so each moment of the poll (reading, waiting) can be hit on purpose.
 */

let t: EventsTestApp;
/** The app's database, counting the queue reads (`omb_read_queue`) sent through it. */
let counted: ReturnType<typeof countingQueueReads>;
beforeAll(async () => {
  t = await buildEventsApp({ REGISTRATIONS_PER_MINUTE: '1000' });
  counted = countingQueueReads(t.database.sql);
});
afterAll(async () => {
  await t?.close();
});

/** Starts a poll; `outcome` settles with what it was answered, or how it failed; `calls` counts its answers. */
function startPoll(hub: EventHub, installationId: string, waitMs = 20_000) {
  let settle!: (outcome: { error: Error | null; result?: PollResult }) => void;
  const outcome = new Promise<{ error: Error | null; result?: PollResult }>((resolve) => {
    settle = resolve;
  });
  let calls = 0;
  const started = performance.now();
  const held = pollEvents(
    { sql: counted.sql, hub, sealing: t.events.sealing! },
    { installationId, cursor: undefined, limit: 10, waitMs },
    (error, result) => {
      calls++;
      settle({ error, result });
    },
  );
  return { held, outcome, elapsed: () => performance.now() - started, calls: () => calls };
}

/** An event accepted through the webhook route (which wakes the app's own waiting room only). */
async function deliver(installationId: string, n: number): Promise<string> {
  return sendAccepted(t, await insertTrigger(t.database, installationId), { n });
}

describe('a long poll', () => {
  it('answers at once, empty, when its client hangs up while it waits, and leaves the waiting room', async () => {
    const hub = new EventHub();
    const { installationId } = await register(t.app);
    const poll = startPoll(hub, installationId);
    await until(() => hub.size === 1);
    poll.held.hangUp();
    const { error, result } = await poll.outcome;
    expect(error).toBeNull();
    expect(result).toMatchObject({ answer: { events: [], cursor: expect.any(String) }, shuttingDown: false });
    expect(hub.size).toBe(0);
    expect(poll.elapsed()).toBeLessThan(2_000);
  });

  it('does not wait when its client hung up during its read', async () => {
    const hub = new EventHub();
    const { installationId } = await register(t.app);
    const poll = startPoll(hub, installationId);
    // The read is on its way to Postgres: the hang-up comes before its answer.
    poll.held.hangUp();
    const { result } = await poll.outcome;
    expect(result?.answer.events).toEqual([]);
    expect(hub.size).toBe(0);
    expect(poll.elapsed()).toBeLessThan(2_000);
  });

  it('keeps a wake that came during its read: it reads again before it waits', async () => {
    const hub = new EventHub();
    const { installationId } = await register(t.app);
    const before = counted.reads();
    const poll = startPoll(hub, installationId);
    // The first read is on its way to Postgres; something commits and wakes the room now.
    hub.wake(installationId);
    await until(() => hub.size === 1 && counted.reads() - before === 2);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(counted.reads() - before).toBe(2);

    // Woken while it waits, it reads again and answers what committed.
    const id = await deliver(installationId, 1);
    hub.wake(installationId);
    const { result } = await poll.outcome;
    expect(result?.answer.events.map((event) => event.id)).toEqual([id]);
    expect(counted.reads() - before).toBe(3);
    expect(hub.size).toBe(0);
  });

  it('answers at once with shuttingDown when the broker closes during its read or its wait', async () => {
    const duringRead = new EventHub();
    const a = await register(t.app);
    const first = startPoll(duringRead, a.installationId);
    duringRead.closeAll();
    expect((await first.outcome).result).toMatchObject({ answer: { events: [] }, shuttingDown: true });

    const duringWait = new EventHub();
    const second = startPoll(duringWait, a.installationId);
    await until(() => duringWait.size === 1);
    duringWait.closeAll();
    expect((await second.outcome).result).toMatchObject({ answer: { events: [] }, shuttingDown: true });
    // Once closing, a new poll does not wait either.
    const third = startPoll(duringWait, a.installationId);
    expect((await third.outcome).result).toMatchObject({ shuttingDown: true });
    expect(third.elapsed()).toBeLessThan(2_000);
  });

  it('fails with installation_disabled when its installation is disabled while it waits, and answers once', async () => {
    const hub = new EventHub();
    const { installationId } = await register(t.app);
    const poll = startPoll(hub, installationId);
    await until(() => hub.size === 1);
    hub.disable(installationId);
    const { error } = await poll.outcome;
    expect(error).toBeInstanceOf(AppError);
    expect(error).toMatchObject({ status: 403, code: 'installation_disabled' });
    // Whatever comes after, it has answered.
    poll.held.hangUp();
    hub.wake(installationId);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(poll.calls()).toBe(1);
    expect(hub.size).toBe(0);
  });

  it('fails with 401 when its installation is removed while it waits or reads, and answers once', async () => {
    const hub = new EventHub();
    const { installationId } = await register(t.app);
    const waiting = startPoll(hub, installationId);
    await until(() => hub.size === 1);
    hub.remove(installationId);
    expect((await waiting.outcome).error).toMatchObject({ status: 401, code: 'unauthorized' });
    hub.wake(installationId);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(waiting.calls()).toBe(1);

    // The removal comes while its first read is on its way to Postgres (which still finds the row).
    const reading = startPoll(hub, installationId);
    hub.remove(installationId);
    expect((await reading.outcome).error).toMatchObject({ status: 401, code: 'unauthorized' });
    expect(reading.elapsed()).toBeLessThan(2_000);
    expect(hub.size).toBe(0);
  });

  it('answers empty when its wait is over', async () => {
    const hub = new EventHub();
    const { installationId } = await register(t.app);
    const poll = startPoll(hub, installationId, 150);
    const { result } = await poll.outcome;
    expect(result?.answer.events).toEqual([]);
    expect(poll.elapsed()).toBeGreaterThanOrEqual(140);
    expect(hub.size).toBe(0);
  });

  it('reads again shortly when a read after its wait finds the database unreachable, and answers what it then reads', async () => {
    const hub = new EventHub();
    const { installationId } = await register(t.app);
    // Reads through this fail as an unreachable database would, while `down` holds.
    let down = false;
    let refused = 0;
    const flaky = new Proxy(t.database.sql, {
      apply(target, thisArg, args: unknown[]) {
        const strings = args[0];
        if (down && Array.isArray(strings) && strings.join('?').includes('omb_read_queue')) {
          refused++;
          return Promise.reject(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }));
        }
        return Reflect.apply(target as unknown as (...a: unknown[]) => unknown, thisArg, args);
      },
    }) as typeof t.database.sql;
    let settle!: (outcome: { error: Error | null; result?: PollResult }) => void;
    const outcome = new Promise<{ error: Error | null; result?: PollResult }>((resolve) => {
      settle = resolve;
    });
    pollEvents(
      { sql: flaky, hub, sealing: t.events.sealing! },
      { installationId, cursor: undefined, limit: 10, waitMs: 20_000 },
      (error, result) => settle({ error, result }),
    );
    await until(() => hub.size === 1);
    down = true;
    hub.wake(installationId);
    await until(() => refused >= 2);
    const id = await deliver(installationId, 1);
    down = false;
    const { error, result } = await outcome;
    expect(error).toBeNull();
    expect(result?.answer.events.map((e) => e.id)).toEqual([id]);
  });

  it('answers the first read’s failure at once: only a read after a wait is tried again', async () => {
    const hub = new EventHub();
    const { installationId } = await register(t.app);
    const refusing = new Proxy(t.database.sql, {
      apply() {
        return Promise.reject(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }));
      },
    }) as typeof t.database.sql;
    const failed = await new Promise<Error | null>((resolve) =>
      pollEvents(
        { sql: refusing, hub, sealing: t.events.sealing! },
        { installationId, cursor: undefined, limit: 10, waitMs: 20_000 },
        (error) => resolve(error),
      ),
    );
    expect((failed as Error & { code?: string }).code).toBe('ECONNREFUSED');
    expect(hub.size).toBe(0);
  });
});
