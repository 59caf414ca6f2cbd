import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

/**
 * The broker's Prometheus figures. One `Metrics` per process (per app in tests), each with its
 * own registry, so nothing is global.
 */
export interface Metrics {
  readonly registry: Registry;
  readonly httpRequestDuration: Histogram<'method' | 'route' | 'status'>;
  readonly webhooks: Counter<'outcome'>;
  readonly eventsQueued: Counter<'type'>;
  readonly eventsUnreadable: Counter;
  readonly eventsDelivered: Counter;
  readonly composioCalls: Counter<'operation' | 'outcome'>;
  readonly composioCallDuration: Histogram<'operation' | 'outcome'>;
  /** Set from the long-poll hub when scraped. */
  readonly longPollsWaiting: Gauge;
  readonly knownInstallations: Gauge;
  /** Set from the database when scraped. */
  readonly queueDepth: Gauge;
  readonly oldestUnacknowledgedAge: Gauge;
  /** 1 when the last scrape reached the database, else 0. */
  readonly databaseUp: Gauge;
  /** Set from the database when scraped: triggers that should be producing events. */
  readonly triggersActive: Gauge;
  /** What the reconciliation with Composio repaired (src/triggers/reconcile.ts), by kind. */
  readonly triggerRepairs: Counter<'kind'>;
}

export function createMetrics(options: { defaultMetrics?: boolean } = {}): Metrics {
  const registry = new Registry();
  if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: registry, prefix: 'omb_' });
  const registers = [registry];
  return {
    registry,
    httpRequestDuration: new Histogram({
      name: 'omb_http_request_duration_seconds',
      help: 'HTTP requests by route and status, in seconds (long-polls included).',
      labelNames: ['method', 'route', 'status'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    }),
    webhooks: new Counter({
      name: 'omb_webhooks_total',
      help: 'Composio webhooks by outcome (accepted, duplicate, unknown_trigger, paused, filtered, over_quota, bad_signature, …).',
      labelNames: ['outcome'],
      registers,
    }),
    eventsQueued: new Counter({
      name: 'omb_events_queued_total',
      help: 'Events appended to installation queues, by type.',
      labelNames: ['type'],
      registers,
    }),
    eventsUnreadable: new Counter({
      name: 'omb_events_unreadable_total',
      help: 'Events left out of poll answers because their data did not decrypt for their row (a data key missing, or a value copied from another row); each is also logged.',
      registers,
    }),
    eventsDelivered: new Counter({
      name: 'omb_events_delivered_total',
      help: 'Events handed to installations in poll answers (replays included).',
      registers,
    }),
    composioCalls: new Counter({
      name: 'omb_composio_calls_total',
      help: 'Calls to Composio by operation and outcome (ok or the error code).',
      labelNames: ['operation', 'outcome'],
      registers,
    }),
    composioCallDuration: new Histogram({
      name: 'omb_composio_call_duration_seconds',
      help: 'Latency of calls to Composio, in seconds.',
      labelNames: ['operation', 'outcome'],
      buckets: [0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    }),
    longPollsWaiting: new Gauge({
      name: 'omb_long_polls_waiting',
      help: 'Event polls this process is holding open right now.',
      registers,
    }),
    knownInstallations: new Gauge({
      name: 'omb_known_installations',
      help: 'Installations whose token this process knows in memory (KNOWN_INSTALLATIONS_PER_PROCESS at most; 0 while its LISTEN connection is lost).',
      registers,
    }),
    queueDepth: new Gauge({
      name: 'omb_queue_depth',
      help: 'Events not yet acknowledged, over all installations.',
      registers,
    }),
    oldestUnacknowledgedAge: new Gauge({
      name: 'omb_oldest_unacknowledged_event_age_seconds',
      help: 'Age of the oldest event not yet acknowledged (0 when none).',
      registers,
    }),
    databaseUp: new Gauge({
      name: 'omb_database_up',
      help: 'Whether this process reached its database when scraped (1) or not (0).',
      registers,
    }),
    triggersActive: new Gauge({
      name: 'omb_triggers_active',
      help: 'Triggers enabled, not waiting for a reconnect and not stopped by Composio, over all installations (what should bring webhooks).',
      registers,
    }),
    triggerRepairs: new Counter({
      name: 'omb_trigger_repairs_total',
      help: 'Repairs of the reconciliation with Composio, by kind (remade, found_disabled, repaused, revived, orphan_deleted, failed).',
      labelNames: ['kind'],
      registers,
    }),
  };
}

/** The Composio gateway's `onCall`, counting every call by operation and outcome. */
export function composioCallRecorder(metrics: Metrics): (operation: string, outcome: string, seconds: number) => void {
  return (operation, outcome, seconds) => {
    metrics.composioCalls.inc({ operation, outcome });
    metrics.composioCallDuration.observe({ operation, outcome }, seconds);
  };
}
