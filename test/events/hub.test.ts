import { describe, expect, it } from 'vitest';
import { EventHub, PollClient } from '../../src/events/hub.js';

describe('the waiting room', () => {
  it('wakes only the installation’s waiters, and forgets them once woken', async () => {
    const hub = new EventHub();
    const a1 = hub.subscribe('a', 10_000);
    const a2 = hub.subscribe('a', 10_000);
    const b = hub.subscribe('b', 10_000);
    expect(hub.size).toBe(3);
    hub.wake('a');
    expect(await a1.woken).toBe('event');
    expect(await a2.woken).toBe('event');
    expect(hub.size).toBe(1);
    b.cancel();
    expect(await b.woken).toBe('aborted');
    expect(hub.size).toBe(0);
  });

  it('ends a wait on time', async () => {
    const hub = new EventHub();
    const started = performance.now();
    expect(await hub.subscribe('a', 30).woken).toBe('timeout');
    expect(performance.now() - started).toBeGreaterThanOrEqual(25);
    expect(hub.size).toBe(0);
  });

  it('ends a wait when the client goes away, and does not wait for one already gone', async () => {
    const hub = new EventHub();
    const client = new PollClient();
    const subscription = hub.subscribe('a', 10_000, client);
    client.hangUp();
    expect(await subscription.woken).toBe('aborted');
    expect(hub.size).toBe(0);
    expect(await hub.subscribe('a', 10_000, client).woken).toBe('aborted');
    expect(hub.size).toBe(0);
  });

  it('wakes everyone after a reconnect, ends a disabled installation’s waits, and answers everything at shutdown', async () => {
    const hub = new EventHub();
    const waits = ['a', 'b', 'c'].map((id) => hub.subscribe(id, 10_000));
    hub.wakeAll();
    expect(await Promise.all(waits.map((w) => w.woken))).toEqual(['event', 'event', 'event']);

    const disabled = hub.subscribe('a', 10_000);
    const other = hub.subscribe('b', 10_000);
    hub.disable('a');
    expect(await disabled.woken).toBe('disabled');
    expect(hub.size).toBe(1);

    hub.closeAll();
    expect(await other.woken).toBe('closing');
    expect(await hub.subscribe('c', 10_000).woken).toBe('closing');
    expect(hub.size).toBe(0);
  });

  it('settles a waiter once, whatever comes after', async () => {
    const hub = new EventHub();
    const subscription = hub.subscribe('a', 10_000);
    hub.wake('a');
    hub.disable('a');
    subscription.cancel();
    expect(await subscription.woken).toBe('event');
    expect(hub.size).toBe(0);
  });

  it('supersedes the oldest of an installation’s waiters, in the order they came, as waiters come and go', async () => {
    const hub = new EventHub(2);
    const first = hub.subscribe('a', 10_000);
    const second = hub.subscribe('a', 10_000);
    const other = hub.subscribe('b', 10_000);
    const third = hub.subscribe('a', 10_000);
    expect(await first.woken).toBe('superseded');
    expect(hub.size).toBe(3);
    second.cancel();
    // 'a' is down to one waiter (third); the next one is beside it, the one after supersedes third.
    const fourth = hub.subscribe('a', 10_000);
    const fifth = hub.subscribe('a', 10_000);
    expect(await third.woken).toBe('superseded');
    hub.wake('a');
    expect(await Promise.all([fourth.woken, fifth.woken])).toEqual(['event', 'event']);
    expect(hub.size).toBe(1);
    other.cancel();
    expect(hub.size).toBe(0);
  });

  it('ends only the wait under way when a client hangs up', async () => {
    const hub = new EventHub();
    const client = new PollClient();
    const earlier = hub.subscribe('a', 10_000, client);
    hub.wake('a');
    expect(await earlier.woken).toBe('event');
    const someoneElse = hub.subscribe('a', 10_000);
    const again = hub.subscribe('a', 10_000, client);
    client.hangUp();
    expect(await again.woken).toBe('aborted');
    expect(hub.size).toBe(1);
    someoneElse.cancel();
  });
});
