import type { Logger } from 'pino';
import type { Sql } from '../db/database.js';
import type { Hearing } from '../db/hearing.js';
import { startRepeatingJob } from '../repeating-job.js';
import { authenticateHash, type Installation } from './installations.js';
import { touchLastSeen } from './store.js';
import { hashToken, TOKEN_PATTERN } from './tokens.js';

/**
 * How stale `last_seen_at` may be: a request writes it when the stored one is older than this
 * (the token check of a process that does not know the token yet), and a process serving the
 * installation from memory sends it along in a batch (`LastSeen`) at most this often.
 */
const LAST_SEEN_RESOLUTION_SECONDS = 3_600;
/** How often the installations a process served from memory are written back as seen. */
const LAST_SEEN_FLUSH_MS = 60_000;
/** Installations written back as seen per statement. */
const LAST_SEEN_BATCH = 10_000;

/**
 * Who each token is, kept in this process's memory, so that a request from an installation this
 * process has served before costs no statement: its token's hash, the installation, and when
 * this process last had it recorded as seen. Only enabled installations are kept: a disabled
 * one is asked of the database at each request, so re-enabling needs no announcement.
 *
 * What could change the answer is announced by the process that changes it, in the change's own
 * transaction: a removal (`omb_installation_removed`) and a disable (`omb_installation_disabled`),
 * heard through the LISTEN connection and handed to `forget`. While this process cannot hear
 * (`Hearing.epoch` null: not listening yet, the connection lost), nothing kept is trusted: every
 * token is asked of the database, and nothing is kept. Everything is forgotten when hearing is
 * lost (`forgetAll`), and a lookup that was under way when something was forgotten keeps nothing.
 *
 * Bounded: past `capacity` installations, the one learnt the longest ago is forgotten (its next
 * request costs one lookup).
 */
export class InstallationDirectory {
  private readonly byHash = new Map<string, Known>();
  private readonly hashById = new Map<string, string>();
  /** Counts forgetting: a lookup that began before the last one keeps nothing. */
  private forgotten = 0;
  private readonly lastSeen: LastSeen;

  constructor(
    private readonly sql: Sql,
    private readonly hearing: Hearing,
    log: Logger,
    private readonly capacity = 1_000_000,
  ) {
    this.lastSeen = new LastSeen(sql, log);
  }

  /** How many installations are known (for metrics). */
  get size(): number {
    return this.byHash.size;
  }

  /**
   * The installation a bearer token names, when it is known here and may be trusted: the answer
   * from memory, with no statement (and no promise). Undefined: ask `authenticate`.
   */
  known(token: string): Installation | undefined {
    return TOKEN_PATTERN.test(token) ? this.knownByHash(hashToken(token)) : undefined;
  }

  /**
   * The installation a bearer token names; `'disabled'` when an operator disabled it; null when
   * the token is unknown.
   */
  async authenticate(token: string): Promise<Installation | 'disabled' | null> {
    if (!TOKEN_PATTERN.test(token)) return null;
    const hash = hashToken(token);
    const known = this.knownByHash(hash);
    if (known) return known;
    const epoch = this.hearing.epoch;
    const forgotten = this.forgotten;
    const found = await authenticateHash(this.sql, hash, LAST_SEEN_RESOLUTION_SECONDS);
    if (typeof found === 'object' && found !== null && epoch !== null && this.hearing.epoch === epoch && this.forgotten === forgotten) {
      this.remember(hash, { installation: found, seenRecordedAt: Date.now() });
    }
    return found;
  }

  private knownByHash(hash: string): Installation | undefined {
    if (this.hearing.epoch === null) return undefined;
    const known = this.byHash.get(hash);
    if (!known) return undefined;
    this.lastSeen.served(known, Date.now());
    return known.installation;
  }

  /** The installation was removed or disabled (here or in another process): its token is asked again. */
  forget(installationId: string): void {
    this.forgotten++;
    const hash = this.hashById.get(installationId);
    if (hash === undefined) return;
    this.hashById.delete(installationId);
    this.byHash.delete(hash);
  }

  /** Announcements may have been missed: nothing kept is trusted. */
  forgetAll(): void {
    this.forgotten++;
    this.byHash.clear();
    this.hashById.clear();
  }

  /** Writes back, every minute, which installations were served from memory. */
  start(): void {
    this.lastSeen.start();
  }

  /** Writes back what is pending, and stops. */
  stop(): Promise<void> {
    return this.lastSeen.stop();
  }

  private remember(hash: string, known: Known): void {
    if (this.byHash.size >= this.capacity) {
      // A Map iterates in insertion order: the first is the one learnt the longest ago.
      const oldest = this.byHash.entries().next().value;
      if (oldest) {
        this.byHash.delete(oldest[0]);
        this.hashById.delete(oldest[1].installation.id);
      }
    }
    this.byHash.set(hash, known);
    this.hashById.set(known.installation.id, hash);
  }
}

interface Known {
  readonly installation: Installation;
  /** When this process last had the installation recorded as seen (ms since the epoch). */
  seenRecordedAt: number;
}

/**
 * `last_seen_at` for requests served from memory: an installation is noted once per
 * `LAST_SEEN_RESOLUTION_SECONDS` per process, and the notes are written every minute, many
 * installations a statement, each row only if what it holds is older than the resolution. A poll
 * costs no statement; an installation polling all day costs each process serving it one entry in
 * a batch an hour, and its row one write an hour.
 */
class LastSeen {
  private pending = new Set<string>();
  private job: { stop(): Promise<void> } | undefined;

  constructor(
    private readonly sql: Sql,
    private readonly log: Logger,
  ) {}

  served(known: Known, now: number): void {
    if (now - known.seenRecordedAt < LAST_SEEN_RESOLUTION_SECONDS * 1000) return;
    known.seenRecordedAt = now;
    this.pending.add(known.installation.id);
  }

  start(): void {
    this.job ??= startRepeatingJob(() => this.flush(), { intervalMs: LAST_SEEN_FLUSH_MS, firstDelayMs: LAST_SEEN_FLUSH_MS });
  }

  async stop(): Promise<void> {
    await this.job?.stop();
    this.job = undefined;
    await this.flush();
  }

  private async flush(): Promise<void> {
    const ids = [...this.pending];
    this.pending = new Set();
    for (let i = 0; i < ids.length; i += LAST_SEEN_BATCH) {
      const batch = ids.slice(i, i + LAST_SEEN_BATCH);
      try {
        await touchLastSeen(this.sql, batch, LAST_SEEN_RESOLUTION_SECONDS);
      } catch (err) {
        // Kept for the next flush: a `last_seen_at` late by a minute more is all it costs.
        for (const id of ids.slice(i)) this.pending.add(id);
        this.log.warn({ err, installations: ids.length - i }, 'could not record installations as seen; trying again in a minute');
        return;
      }
    }
  }
}
