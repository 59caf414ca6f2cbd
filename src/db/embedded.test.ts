import { describe, expect, it } from 'vitest';
import { RESTART_FOR_MS, restartDelays } from './embedded.js';

describe('restartDelays', () => {
  it('keeps the half-minute schedule by default: doubling from 250 ms, at most 15 s apart', () => {
    expect(restartDelays(RESTART_FOR_MS)).toEqual([250, 500, 1000, 2000, 4000, 8000, 15_000]);
  });

  it('tries until the waits add up to the window, every 15 s past the first seconds', () => {
    expect(restartDelays(2000)).toEqual([250, 500, 1000, 2000]);
    const tenMinutes = restartDelays(600_000);
    expect(tenMinutes.reduce((sum, delay) => sum + delay, 0)).toBeGreaterThanOrEqual(600_000);
    expect(tenMinutes.slice(7).every((delay) => delay === 15_000)).toBe(true);
    expect(tenMinutes).toHaveLength(45);
  });
});
