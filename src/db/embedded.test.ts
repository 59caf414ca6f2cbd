import { describe, expect, it } from 'vitest';
import { RESTART_FOR_MS, restartDelays } from './embedded.js';

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
