import { z } from 'zod';

/**
 * A plain decimal integer from `min` to `max`, as a query string gives it, and nothing else:
 * `Number()` would also take `0x10`, `1e1`, ` 16`, `16.0` or an empty value (as 0), and
 * `wait=0x10` would wait 16 s. Up to three digits (`wait=025` is 25), or as many as `max` has.
 */
export const decimal = (min: number, max: number) =>
  z
    .string()
    .regex(new RegExp(`^[0-9]{1,${Math.max(3, String(max).length)}}$`), 'must be a plain decimal integer')
    .transform(Number)
    .pipe(z.number().int().min(min).max(max));
