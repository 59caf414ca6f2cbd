import { Sealing } from '../src/events/sealing.js';

/**
 * The broker as `npm start` runs it, except that it stores every event's data in clear, as a
 * broker does while one of the previous release is connected: what bench/events.ts measures the
 * cost of encryption at rest against, in the same run. For the bench only.
 */
Sealing.prototype.sealFor = () => undefined;
await import('../src/main.js');
