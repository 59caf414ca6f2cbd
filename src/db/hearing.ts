/**
 * Whether this process hears what the other processes announce (the LISTEN connection,
 * src/events/queue/listener.ts), so that what it keeps in memory and learns of changes by notification
 * may be trusted. `epoch` is a number that stays the same while the process hears every
 * notification, and null while it cannot: knowledge learnt in one epoch is trusted only while
 * that epoch is still the current one.
 */
export interface Hearing {
  readonly epoch: number | null;
}
