import type { Logger } from 'pino';
import postgres from 'postgres';
import { DEFAULT_POLLS_PER_INSTALLATION } from '../../config.js';
import { APPLICATION_NAMES, type Database, type Sql } from '../../db/database.js';
import { INSTALLATION_REMOVED_CHANNEL } from '../../installations/deletion.js';
import { InstallationDirectory } from '../../installations/directory.js';
import { INSTALLATION_DISABLED_CHANNEL } from '../../installations/disable.js';
import { EventHub } from './hub.js';
import { QueueKnowledge } from './knowledge.js';
import { type ListenClientOptions, NotificationListener } from './listener.js';
import { EVENTS_CHANNEL, EventNotifier } from './notifier.js';
import { queueHeads } from './queue.js';

/**
 * The per-process machinery behind the event queue: the waiting room for long polls, the one
 * LISTEN connection that feeds it (other features register their channels on it too), what the
 * process knows of the queues and of who each token is (trusted while it hears that LISTEN
 * connection), and the local side of appends.
 */
export interface QueueRuntime {
  readonly hub: EventHub;
  readonly notifier: EventNotifier;
  readonly knowledge: QueueKnowledge;
  /** Who each token is, answered from memory for installations this process has served. */
  readonly installations: InstallationDirectory;
  /** The process's one LISTEN connection; register a channel with `listener.on` before `start`. */
  readonly listener: NotificationListener;
  /** Opens the LISTEN connection; polls are woken across processes from then on. */
  start(): Promise<void>;
  /** Answers every waiting poll now (empty), at the start of shutdown. */
  closeAll(): void;
  /** Stops listening and writes back what is pending; before the database closes. */
  stop(): Promise<void>;
}

export function createQueueRuntime(options: {
  database: Pick<Database, 'sql' | 'sessionUrl'>;
  logger: Logger;
  pollsPerInstallation?: number;
  /** See NotificationListener's `heartbeatMs`. */
  listenerHeartbeatMs?: number;
  /** Installations whose token and queue each process keeps in memory at most (`KNOWN_INSTALLATIONS_PER_PROCESS`). */
  knownInstallations?: number;
}): QueueRuntime {
  const { sql, sessionUrl } = options.database;
  const log = options.logger.child({ component: 'events' });
  const hub = new EventHub(options.pollsPerInstallation ?? DEFAULT_POLLS_PER_INSTALLATION);
  const listenClient = (listening: ListenClientOptions) =>
    postgres(sessionUrl, {
      ...listening,
      onnotice: () => {},
      connect_timeout: 10,
      connection: { application_name: APPLICATION_NAMES.listen },
    });
  const listener = new NotificationListener(sql, listenClient, log, options.listenerHeartbeatMs);
  const knowledge = new QueueKnowledge(listener, options.knownInstallations);
  const installations = new InstallationDirectory(sql, listener, log, options.knownInstallations);
  const notifier = new EventNotifier(hub, knowledge, listener);
  listenForQueue(listener, hub, log, { sql, knowledge, installations });
  let started: Promise<void> | undefined;
  return {
    hub,
    notifier,
    knowledge,
    installations,
    listener,
    start() {
      started ??= listener.start().then(() => installations.start());
      return started;
    },
    closeAll() {
      hub.closeAll();
    },
    async stop() {
      hub.closeAll();
      if (started)
        await started.then(
          () => listener.stop(),
          () => undefined,
        );
      await installations.stop();
    },
  };
}

/**
 * Keeps the hub's waiters, and what the process knows, up to date with what other processes
 * announce: an append wakes the installation's polls and drops its known head; a disable or a
 * removal ends its polls and drops its token. When the connection is lost, everything known is
 * dropped at once; when it is back, the installations with waiting polls are read in ONE
 * statement (where each queue stands, and whether it may still be served), then every poll looks
 * again: those at their queue's head go on waiting without a read of their own.
 */
export function listenForQueue(listener: NotificationListener, hub: EventHub, log: Logger, known?: KnownParts): void {
  const ends = installationEnds(hub, known);
  listener.on(EVENTS_CHANNEL, (installationId) => {
    known?.knowledge.heard(installationId);
    hub.wake(installationId);
  });
  listener.on(INSTALLATION_DISABLED_CHANNEL, ends.disabled);
  listener.on(INSTALLATION_REMOVED_CHANNEL, ends.removed);
  listener.onLost(() => {
    known?.knowledge.forgetAll();
    known?.installations.forgetAll();
  });
  listener.onReconnect((reason) => {
    const waking = () => {
      log.info(
        { waiting: hub.size },
        `${reason}; waking every waiting poll (those known to be at their queue’s head wait on without a read)`,
      );
      hub.wakeAll();
    };
    if (!known) return waking();
    void bringUpToDate(known, hub, ends, log).finally(waking);
  });
}

/** What the process keeps of tokens and queues, and the pool to read them again with. */
interface KnownParts {
  sql: Sql;
  knowledge: QueueKnowledge;
  installations: InstallationDirectory;
}

/** An installation found disabled or removed, however it was learnt (announced, or read after a reconnect): its polls end and its token is asked again. */
function installationEnds(hub: EventHub, known: KnownParts | undefined) {
  return {
    disabled(installationId: string) {
      known?.installations.forget(installationId);
      hub.disable(installationId);
    },
    removed(installationId: string) {
      known?.installations.forget(installationId);
      known?.knowledge.forget(installationId);
      hub.remove(installationId);
    },
  };
}

/** Where the queues of every installation with waiting polls stand, in one statement; gone or disabled ones end their polls. */
async function bringUpToDate(known: KnownParts, hub: EventHub, ends: ReturnType<typeof installationEnds>, log: Logger): Promise<void> {
  const installationIds = hub.installationIds();
  const tickets = new Map(installationIds.map((id) => [id, known.knowledge.ticket(id)]));
  let heads: Awaited<ReturnType<typeof queueHeads>>;
  try {
    heads = await queueHeads(known.sql, installationIds);
  } catch (err) {
    // Each poll then reads for itself.
    log.warn({ err, installations: installationIds.length }, 'could not read where the waiting polls’ queues stand');
    return;
  }
  const found = new Set<string>();
  for (const head of heads) {
    found.add(head.installationId);
    if (head.disabled) {
      ends.disabled(head.installationId);
    } else {
      known.knowledge.learn(head.installationId, tickets.get(head.installationId) ?? null, { head: head.last, acked: head.acked });
    }
  }
  for (const installationId of installationIds) if (!found.has(installationId)) ends.removed(installationId);
}
