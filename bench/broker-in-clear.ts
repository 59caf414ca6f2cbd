import { Sealing } from '../src/events/sealing.js';

/**
 * The broker as `npm start` runs it, except that it stores every event's data in clear, as a
 * broker does while one of the previous release is connected: what bench/events.ts measures the
 * cost of encryption at rest against, in the same run. With `BENCH_SEALING=discarded` it still
 * seals each event's data as the broker does, then stores the clear data: what sealing itself
 * costs, apart from carrying the sealed data to Postgres. For the bench only.
 */
const sealFor = Sealing.prototype.sealFor;
Sealing.prototype.sealFor =
  process.env.BENCH_SEALING === 'discarded'
    ? function (this: Sealing, ...args: Parameters<Sealing['sealFor']>) {
        sealFor.apply(this, args);
        return undefined;
      }
    : () => undefined;
await import('../src/main.js');
