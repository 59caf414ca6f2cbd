import closeWithGrace from 'close-with-grace';
import type { Logger } from 'pino';
import { buildApp } from './app.js';
import { systemClock } from './clock.js';
import { type ComposioGateway, gatewayForProject } from './composio/index.js';
import { type Config, ConfigError, loadConfig } from './config.js';
import { MissingDataKeys, missingKeyIds } from './data-keys/in-use.js';
import { type DataKeys, keyFile, keyIds } from './data-keys/keys.js';
import { DataDirInUseError } from './db/data-dir-lock.js';
import { type Database, openDatabase } from './db/database.js';
import { driverFault } from './db/driver-faults.js';
import { type EmbeddedDatabase, freePort, startEmbeddedPostgres } from './db/embedded.js';
import { applyMigrations, MigrationError } from './db/migrate.js';
import { refusedStartupParameter, SessionNotKept } from './db/session-check.js';
import { startRetentionJob } from './events/retention/retention.js';
import { createEventsRuntime } from './events/runtime.js';
import { ListenError, listenOn } from './http/listen.js';
import { createLogger } from './logger.js';
import { composioCallRecorder, createMetrics, type Metrics } from './metrics/metrics.js';
import { startMetricsServer } from './metrics/routes.js';
import { noteOperatorKeys } from './operators/audit.js';
import { startAuditRetentionJob } from './operators/audit-retention.js';
import { CLOSE_MARGIN_MS, closeServer } from './shutdown.js';
import { startSandbox, type TriggerOwner } from './sim/index.js';
import { startReconcileJob } from './triggers/reconcile-job.js';
import { startReconnectJob } from './triggers/reconnect-job.js';
import { findTriggerByComposioId } from './triggers/store.js';

/** config → database → migrations → app → listen, and the reverse on the way out. */
async function main(): Promise<void> {
  let config: Config;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`omb-broker: ${error.message}\n`);
      process.exit(78);
    }
    throw error;
  }
  const logger = createLogger(config.logLevel);
  const metrics = createMetrics();

  let embedded: EmbeddedDatabase | undefined;
  const closers: Array<() => Promise<unknown>> = [];
  const closeAll = async () => {
    for (const close of closers.reverse()) await close().catch((err: unknown) => logger.warn({ err }, 'close failed'));
    closers.length = 0;
  };
  // Set when the embedded Postgres died for good: shut down and exit 1, so a supervisor restarts us.
  let lostDatabase: Error | undefined;
  let shutDown: (() => void) | undefined;
  // An unhandled rejection stops the broker (gracefully once it serves), but for the one the
  // database driver leaves unhandled, which is not a fault of the broker's (see driverFault).
  let onRejection = (reason: unknown): void => {
    logger.fatal({ err: reason }, 'broker failed to start');
    void closeAll().finally(() => process.exit(1));
  };
  process.on('unhandledRejection', (reason) => {
    const fault = driverFault(reason);
    if (fault) logger.warn({ err: reason }, fault);
    else onRejection(reason);
  });

  try {
    let databaseUrl = config.databaseUrl;
    if (!databaseUrl) {
      embedded = await startEmbeddedPostgres({
        dataDir: config.dataDir,
        logger,
        restartForMs: config.embeddedRestartForMs,
        onLost: (error) => {
          lostDatabase = error;
          shutDown?.();
        },
      });
      closers.push(() => embedded!.stop());
      databaseUrl = embedded.url;
    }
    const directUrl = config.databaseDirectUrl;
    await applyMigrations(directUrl ?? databaseUrl, logger, {
      setting: directUrl ? 'DATABASE_DIRECT_URL' : 'DATABASE_URL',
      direct: embedded !== undefined,
    });
    const database = openDatabase({
      url: databaseUrl,
      ...(directUrl ? { directUrl } : {}),
      poolSize: config.databasePoolSize,
      logger,
      timeoutMs: config.databaseTimeoutMs,
    });
    closers.push(() => database.close());

    const composio = await connectComposio(config, logger, metrics, closers, database);
    config = composio.config;

    // app.close() answers waiting polls at once and stops the event listener before the pool closes.
    const dataKeys = dataKeysOf(config, logger);
    const missing = await missingKeyIds(database.sql, dataKeys);
    if (missing.length > 0) throw new MissingDataKeys(missing);
    const events = createEventsRuntime({ database, logger, ...config.events, dataKeys });
    const app = await buildApp({ config, database, logger, clock: systemClock, events, composio: composio.gateway, metrics });
    closers.push(() => closeServer(app, config.shutdownGraceMs, logger));
    if (config.metrics.host !== undefined && config.metrics.port !== undefined) {
      const metricsServer = await startMetricsServer({
        host: config.metrics.host,
        port: config.metrics.port,
        sql: database.sql,
        db: database.db,
        metrics,
        sources: { longPollsWaiting: () => events.hub.size, knownInstallations: () => events.installations.size },
      });
      closers.push(() => closeServer(metricsServer, config.shutdownGraceMs, logger));
      logger.info({ url: `${metricsServer.listeningOrigin}/metrics` }, 'metrics listening');
    }
    const retention = startRetentionJob({ sql: database.sql, clock: systemClock, logger, retentionDays: config.events.retentionDays });
    closers.push(() => retention.stop());
    const auditRetention = startAuditRetentionJob({
      sql: database.sql,
      clock: systemClock,
      logger,
      retentionDays: config.auditRetentionDays,
    });
    closers.push(() => auditRetention.stop());
    // Operator keys come from configuration: a change shows at start, and goes into the audit trail.
    const kids = (config.operators.publicKeys?.keys ?? []).map((key) => String(key.kid));
    if (await noteOperatorKeys(database.db, kids, systemClock.now()))
      logger.info({ kids }, 'operator keys changed; recorded in the audit trail');
    const reconnect = startReconnectJob({
      db: database.db,
      sql: database.sql,
      sessions: database.sessions,
      composio: composio.gateway,
      log: logger.child({ component: 'trigger-reconnect' }),
      clock: systemClock,
      intervalMs: config.triggers.reconnectCheckSeconds * 1000,
    });
    closers.push(() => reconnect.stop());
    const reconcile = startReconcileJob({
      db: database.db,
      sql: database.sql,
      sessions: database.sessions,
      composio: composio.gateway,
      log: logger.child({ component: 'trigger-reconcile' }),
      clock: systemClock,
      intervalMs: config.triggers.reconcileMinutes * 60_000,
      callsPerMinute: config.composio.callsPerMinute,
      timeoutMs: config.composio.timeoutMs,
      notifier: events.notifier,
      onRepair: (kind) => metrics.triggerRepairs.inc({ kind }),
    });
    closers.push(() => reconcile.stop());

    // The grace period bounds the requests; the margin is for closing the database and Postgres after them.
    // The stop signals and the ignored ones are handled below (see stopOnSignals, ignoreSignals);
    // close-with-grace takes the rest (faults such as SIGSEGV, an uncaught error).
    let stopSignal: NodeJS.Signals | undefined;
    let rejected: unknown;
    const grace = closeWithGrace(
      { delay: config.shutdownGraceMs + CLOSE_MARGIN_MS, logger, skip: [...STOP_SIGNALS, ...IGNORED_SIGNALS, 'unhandledRejection'] },
      async ({ signal, err }) => {
        if (err ?? rejected) logger.error({ err: err ?? rejected }, 'shutting down after an error');
        else if (lostDatabase) logger.fatal({ err: lostDatabase }, 'shutting down: the embedded Postgres is gone');
        else logger.info({ signal: signal ?? stopSignal }, 'shutting down');
        embedded?.stopping();
        await closeAll();
        if (lostDatabase) process.exit(1);
      },
    );
    shutDown = grace.close;
    onRejection = (reason) => {
      rejected = reason;
      grace.close();
    };
    if (lostDatabase) grace.close();
    stopOnSignals(logger, (signal) => {
      stopSignal = signal;
      grace.close();
    });
    ignoreSignals(logger);
    const parentWatch = watchParent(logger, grace.close);
    closers.push(async () => clearInterval(parentWatch));

    const url = await listenOn(app, {
      port: config.port,
      host: config.host,
      ...(composio.choosePortAgain ? { choosePortAgain: { next: composio.choosePortAgain, logger } } : {}),
    });
    logger.info({ url, database: embedded ? 'embedded' : 'DATABASE_URL', pid: process.pid }, 'broker listening');
  } catch (error) {
    await closeAll();
    if (error instanceof DataDirInUseError) {
      // Not a crash: a supervisor should not keep retrying (78: a configuration problem).
      process.stderr.write(`omb-broker: ${error.message}\n`);
      logger.fatal({ dataDir: error.dataDir, pid: error.pid }, 'the data folder is in use by a running broker');
      process.exit(78);
    }
    if (error instanceof MissingDataKeys) {
      // A configuration problem (78): started again as it is, it would refuse again.
      process.stderr.write(`omb-broker: ${error.message}\n`);
      logger.fatal({ missingDataKeys: error.ids }, 'data keys in use are not configured');
      process.exit(78);
    }
    if (error instanceof SessionNotKept || refusedStartupParameter(error)) {
      // A configuration problem (78): the URL leads to a transaction pooler, which it cannot be.
      const message =
        error instanceof SessionNotKept
          ? error.message
          : `DATABASE_URL refused a startup parameter (${(error as Error).message}), as a transaction pooler does: set DATABASE_DIRECT_URL to Postgres itself and the broker sends the pooler none but application_name (docs/operating.md, "Behind a pooler")`;
      process.stderr.write(`omb-broker: ${message}\n`);
      logger.fatal({ err: error }, 'the database URL leads to a transaction pooler');
      process.exit(78);
    }
    if (error instanceof ListenError) {
      // Not a crash, but said as what to change; 1, as another process may let the port go, or
      // the address come up.
      process.stderr.write(`omb-broker: ${error.message}\n`);
      logger.fatal({ err: error }, 'the broker could not listen');
      process.exit(1);
    }
    if (error instanceof MigrationError) {
      // A lock the migrations could not get while other processes served: 1, so a supervisor tries again.
      process.stderr.write(`omb-broker: ${error.message}\n`);
      logger.fatal({ err: error }, 'the migrations could not be applied');
      process.exit(1);
    }
    logger.fatal({ err: error }, 'broker failed to start');
    process.exit(1);
  }
}

/**
 * The signals that stop the broker gracefully, the table in docs/operating.md: SIGTERM (process
 * managers, containers), SIGINT (Ctrl-C), SIGQUIT (the stop signal of some images and
 * supervisors) and SIGUSR2 (nodemon's restart: it waits for the exit, then starts the broker again).
 */
const STOP_SIGNALS = ['SIGTERM', 'SIGINT', 'SIGQUIT', 'SIGUSR2'] as const satisfies readonly NodeJS.Signals[];
/**
 * Logged and otherwise ignored. SIGHUP asks a daemon to reload, and the broker reads its
 * configuration only at start: stopping there would turn a reload into an outage. (A closed
 * terminal still stops it: its parent goes, see watchParent.)
 */
const IGNORED_SIGNALS = ['SIGHUP'] as const satisfies readonly NodeJS.Signals[];
/** A repeat of a stop signal within this long is the same request arriving twice. */
const REPEATED_SIGNAL_MS = 2000;

/**
 * The first stop signal starts the graceful shutdown. Under `npm start` the same signal
 * often arrives twice: Ctrl-C in a terminal, or a process manager signalling the whole process
 * group, reaches the broker directly and again relayed by npm. A repeat that soon (of any stop
 * signal) is ignored; a later one (someone insisting) exits at once with 1.
 */
function stopOnSignals(logger: Logger, stop: (signal: NodeJS.Signals) => void): void {
  let firstAt: number | undefined;
  const onSignal = (signal: NodeJS.Signals) => {
    if (firstAt === undefined) {
      firstAt = Date.now();
      stop(signal);
    } else if (Date.now() - firstAt < REPEATED_SIGNAL_MS) {
      logger.debug({ signal }, 'stop signal repeated; already shutting down');
    } else {
      logger.error({ signal }, 'second stop signal; exiting at once');
      process.exit(1);
    }
  };
  for (const signal of STOP_SIGNALS) process.on(signal, onSignal);
}

/** Each ignored signal is said in the log, so whoever sent it learns that it changed nothing. */
function ignoreSignals(logger: Logger): void {
  for (const signal of IGNORED_SIGNALS) {
    process.on(signal, () =>
      logger.warn({ signal }, `${signal} ignored: the broker reads its configuration only at start; restart it to apply a change`),
    );
  }
}

/**
 * A process manager stops the broker by signalling the pid it started. `npm start` execs the
 * broker, so npm relays SIGTERM/SIGINT to it and waits; should the parent die without relaying
 * (npm killed with SIGKILL), the broker notices it was orphaned and shuts down gracefully as if
 * signalled, rather than keep running with its Postgres, unsupervised.
 */
function watchParent(logger: Logger, shutDown: () => void): NodeJS.Timeout {
  const parent = process.ppid;
  const timer = setInterval(() => {
    if (parent <= 1 || process.ppid === parent) return;
    clearInterval(timer);
    logger.warn({ parent }, 'the process that started the broker is gone; shutting down');
    shutDown();
  }, PARENT_CHECK_MS);
  timer.unref();
  return timer;
}

const PARENT_CHECK_MS = 1000;

/**
 * The gateway to Composio: the real project with a key, otherwise sandbox mode — the built-in
 * simulator on its own port, subscribed to deliver signed webhooks to this broker.
 */
async function connectComposio(
  config: Config,
  logger: Logger,
  metrics: Metrics,
  closers: Array<() => Promise<unknown>>,
  database: Database,
): Promise<{ config: Config; gateway: ComposioGateway; choosePortAgain?: () => Promise<number> }> {
  const onCall = composioCallRecorder(metrics);
  // The budget lives in the database: every process on the project draws from the same one.
  const gatewayFor = (c: Config) => gatewayForProject({ ...c.composio, apiKey: c.composio.apiKey! }, logger, onCall, database.sql);
  if (config.composio.apiKey) return { config, gateway: gatewayFor(config) };

  // The simulator must know the broker's webhook URL before the broker listens.
  const port = config.port === 0 ? await freePort() : config.port;
  const host = ['0.0.0.0', '::', ''].includes(config.host) ? '127.0.0.1' : config.host;
  const webhookUrl = (on: number) =>
    `${config.publicUrl ?? `http://${host.includes(':') ? `[${host}]` : host}:${on}`}/v1/webhooks/composio`;
  const sandbox = await startSandbox({
    logger,
    sql: database.sql,
    describeTriggers: (ids) => ownersOf(database, ids),
    brokerWebhookUrl: webhookUrl(port),
    port: config.composio.sandboxPort,
    host: config.composio.sandboxHost,
  });
  closers.push(() => sandbox.close());
  process.stdout.write(`${sandbox.bannerLines.join('\n')}\n`);
  logger.warn({ simulator: sandbox.baseUrl, restored: sandbox.restored }, 'sandbox mode: Composio is simulated');
  const sandboxConfig: Config = Object.freeze({
    ...config,
    port,
    composio: Object.freeze({
      ...config.composio,
      apiKey: sandbox.apiKey,
      baseUrl: sandbox.baseUrl,
      webhookSecrets: Object.freeze([sandbox.webhookSecret]),
    }),
  });
  // A port chosen here may be taken by another process before the broker listens (http/listen.ts).
  const choosePortAgain = async () => {
    const next = await freePort();
    await sandbox.deliverTo(webhookUrl(next));
    return next;
  };
  return { config: sandboxConfig, gateway: gatewayFor(sandboxConfig), ...(config.port === 0 ? { choosePortAgain } : {}) };
}

/** For the sandbox simulator's page: whose each Composio trigger is, as the webhooks route them. */
async function ownersOf(database: Database, composioTriggerIds: string[]): Promise<ReadonlyMap<string, TriggerOwner>> {
  const owners = new Map<string, TriggerOwner>();
  for (const id of composioTriggerIds) {
    const row = await findTriggerByComposioId(database.db, id);
    if (row) owners.set(id, { installationId: row.installationId, automationId: row.automationId });
  }
  return owners;
}

await main();

/**
 * `DATA_ENCRYPTION_KEYS`, or (outside production, where config requires the setting) the key file
 * in `DATA_DIR`, made at the first start. Logged by their ids alone.
 */
function dataKeysOf(config: Config, logger: Logger): DataKeys {
  if (config.dataKeys) {
    logger.info({ dataKeys: keyIds(config.dataKeys), source: 'DATA_ENCRYPTION_KEYS' }, 'data encryption keys');
    return config.dataKeys;
  }
  const { keys, created } = keyFile(config.dataDir);
  if (created) {
    logger.warn(
      { file: keys.source, dataKey: keys.current.id },
      'made a data encryption key file: keep a copy apart from the database and its backups, which cannot be read without it (or set DATA_ENCRYPTION_KEYS)',
    );
  }
  logger.info({ dataKeys: keyIds(keys), source: keys.source }, 'data encryption keys');
  return keys;
}
