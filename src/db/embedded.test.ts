import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { freePort, RESTART_FOR_MS, restartDelays } from './embedded.js';

describe('restartDelays', () => {
  it('spreads the default half minute over waits doubling from 250 ms', () => {
    expect(restartDelays(RESTART_FOR_MS)).toEqual([250, 500, 1000, 2000, 4000, 8000, 14_250]);
  });

  it('waits in all exactly the window given, at most 15 s apart', () => {
    expect(restartDelays(2000)).toEqual([250, 500, 1000, 250]);
    const tenMinutes = restartDelays(600_000);
    expect(tenMinutes.reduce((sum, delay) => sum + delay, 0)).toBe(600_000);
    expect(tenMinutes.slice(6, -1).every((delay) => delay === 15_000)).toBe(true);
    expect(tenMinutes).toHaveLength(45);
  });
});

describe('freePort', () => {
  it('answers a port below the ephemeral range, which nothing took between the answer and a listen', async () => {
    const ephemeralFrom = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').split(/\s+/)[0]);
    const ports = await Promise.all(Array.from({ length: 20 }, () => freePort()));
    for (const port of ports) {
      expect(port).toBeGreaterThanOrEqual(10_000);
      expect(port).toBeLessThan(ephemeralFrom);
    }
    const server = createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(ports[0], '127.0.0.1', resolve);
    });
    await new Promise((resolve) => server.close(resolve));
  });

  it('never answers the same port twice in a process, though none of them is listened on yet', async () => {
    // Drawn at random from some 20,000 ports, 600 answers would repeat one nearly always (all but 1 in 2,500).
    const ports: number[] = [];
    for (let i = 0; i < 600; i++) ports.push(await freePort());
    expect(new Set(ports).size).toBe(ports.length);
  });
});
