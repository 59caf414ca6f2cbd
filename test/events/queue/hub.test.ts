import { describe, expect, it } from 'vitest';
import { EventHub } from '../../../src/events/queue/hub.js';
import { waitIn } from '../helpers.js';

describe('the waiting room', () => {
  it('wakes only the installation’s waiters, and forgets them once woken', async () => {
    const hub = new EventHub();
    const a1 = waitIn(hub, 'a', 10_000);
    const a2 = waitIn(hub, 'a', 10_000);
    const b = waitIn(hub, 'b', 10_000);
    expect(hub.size).toBe(3);
    hub.wake('a');
    expect(await a1.woken).toBe('event');
    expect(await a2.woken).toBe('event');
    expect(hub.size).toBe(1);
    b.cancel();
    expect(await b.woken).toBe('cancelled');
    expect(hub.size).toBe(0);
  });

  it('ends a wait on time', async () => {
    const hub = new EventHub();
    const started = performance.now();
    expect(await waitIn(hub, 'a', 30).woken).toBe('timeout');
    expect(performance.now() - started).toBeGreaterThanOrEqual(25);
    expect(hub.size).toBe(0);
  });

  it('leaves the room on cancel without waking the sleeper, once, whatever comes after', async () => {
    const hub = new EventHub();
    const woken: string[] = [];
    const wait = hub.wait('a', 20, { wake: (reason) => woken.push(reason) })!;
    expect(hub.size).toBe(1);
    wait.cancel();
    wait.cancel();
    expect(hub.size).toBe(0);
    hub.wake('a');
    await new Promise((resolve) => setTimeout(resolve, 40));
    expect(woken).toEqual([]);
  });

  it('wakes everyone after a reconnect, ends a disabled installation’s waits, and answers everything at shutdown', async () => {
    const hub = new EventHub();
    const waits = ['a', 'b', 'c'].map((id) => waitIn(hub, id, 10_000));
    hub.wakeAll();
    expect(await Promise.all(waits.map((w) => w.woken))).toEqual(['event', 'event', 'event']);

    const disabled = waitIn(hub, 'a', 10_000);
    const other = waitIn(hub, 'b', 10_000);
    hub.disable('a');
    expect(await disabled.woken).toBe('disabled');
    expect(hub.size).toBe(1);

    hub.closeAll();
    expect(await other.woken).toBe('closing');
    expect(await waitIn(hub, 'c', 10_000).woken).toBe('closing');
    expect(hub.size).toBe(0);
  });

  it('settles a waiter once, whatever comes after', async () => {
    const hub = new EventHub();
    const subscription = waitIn(hub, 'a', 10_000);
    hub.wake('a');
    hub.disable('a');
    subscription.cancel();
    expect(await subscription.woken).toBe('event');
    expect(hub.size).toBe(0);
  });

  it('supersedes the oldest of an installation’s waiters, in the order they came, as waiters come and go', async () => {
    const hub = new EventHub(2);
    const first = waitIn(hub, 'a', 10_000);
    const second = waitIn(hub, 'a', 10_000);
    const other = waitIn(hub, 'b', 10_000);
    const third = waitIn(hub, 'a', 10_000);
    expect(await first.woken).toBe('superseded');
    expect(hub.size).toBe(3);
    second.cancel();
    // 'a' is down to one waiter (third); the next one is beside it, the one after supersedes third.
    const fourth = waitIn(hub, 'a', 10_000);
    const fifth = waitIn(hub, 'a', 10_000);
    expect(await third.woken).toBe('superseded');
    hub.wake('a');
    expect(await Promise.all([fourth.woken, fifth.woken])).toEqual(['event', 'event']);
    expect(hub.size).toBe(1);
    other.cancel();
    expect(hub.size).toBe(0);
  });
});
