import { linkSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { readIfPresent } from './read-if-present.js';

/**
 * One process at a time on a data folder. The lock is a file, `broker.pid`, holding the owner's
 * pid and (on Linux) its start time, so a pid reused by an unrelated process after a crash is not
 * mistaken for the owner. It is created atomically: the content is written to a file of our own
 * and hard-linked to the lock's name, which fails if the name exists, so the lock is never seen
 * half-written and two processes starting at once cannot both win.
 *
 * A lock whose owner is gone (`kill -9`, a crash) is taken over. Only the holder of a second,
 * short-lived lock (`broker.pid.takeover`) may remove a stale lock, and it checks again under that
 * lock that the file is still the stale one, so two processes taking over at once cannot remove
 * each other's fresh lock.
 */
export interface DataDirLock {
  readonly file: string;
  release(): void;
}

export class DataDirInUseError extends Error {
  constructor(
    readonly dataDir: string,
    readonly pid: number,
  ) {
    super(`the data folder ${dataDir} is in use by a running broker (pid ${pid}); stop it first, or give this one another DATA_DIR`);
    this.name = 'DataDirInUseError';
  }
}

interface Owner {
  pid: number;
  startedAt: string | null;
}

export function lockDataDir(dataDir: string): DataDirLock {
  const folder = path.resolve(dataDir);
  const file = path.join(folder, 'broker.pid');
  const takeover = `${file}.takeover`;
  const mine: Owner = { pid: process.pid, startedAt: startTime(process.pid) };

  for (let attempt = 0; attempt < 50; attempt += 1) {
    if (createExclusively(file, mine)) return held(file, mine);
    const owner = readOwner(file);
    if (owner === undefined) continue; // removed meanwhile: try again
    if (owner !== null && isRunning(owner)) throw new DataDirInUseError(folder, owner.pid);

    // The owner is gone. Take the lock over under the takeover lock.
    if (!createExclusively(takeover, mine)) {
      const other = readOwner(takeover);
      if (other && isRunning(other)) throw new DataDirInUseError(folder, other.pid);
      // Left by a process that died while taking over (a window of a few milliseconds).
      removeIfSame(takeover, other);
      continue;
    }
    try {
      // Nobody can create the lock while the stale file is there, and nobody else removes it
      // while we hold the takeover lock: if it is stale now, it is still the stale one.
      const again = readOwner(file);
      if (again === null || (again !== undefined && !isRunning(again))) removeIfSame(file, again);
    } finally {
      removeIfSame(takeover, mine);
    }
  }
  throw new Error(`could not lock the data folder ${folder}`);
}

function held(file: string, mine: Owner): DataDirLock {
  let released = false;
  return {
    file,
    release() {
      if (released) return;
      released = true;
      removeIfSame(file, mine);
    },
  };
}

function createExclusively(file: string, owner: Owner): boolean {
  const draft = `${file}.${process.pid}.${Math.random().toString(36).slice(2)}`;
  writeFileSync(draft, `${owner.pid}\n${owner.startedAt ?? ''}\n`, { mode: 0o644 });
  try {
    linkSync(draft, file);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw error;
  } finally {
    unlinkSync(draft);
  }
}

/** The lock's owner; null for an unreadable file (treated as stale); undefined when there is none. */
function readOwner(file: string): Owner | null | undefined {
  const text = readIfPresent(file);
  if (text === undefined) return undefined;
  const [pidLine, startedLine] = text.split('\n');
  const pid = Number.parseInt(pidLine ?? '', 10);
  if (!Number.isInteger(pid) || pid <= 0 || String(pid) !== pidLine?.trim()) return null;
  return { pid, startedAt: startedLine?.trim() ? startedLine.trim() : null };
}

function sameOwner(a: Owner, b: Owner | null): boolean {
  return b !== null && a.pid === b.pid && a.startedAt === b.startedAt;
}

/** Removes `file` only while it still names `owner` (null: an unreadable file). */
function removeIfSame(file: string, owner: Owner | null | undefined): void {
  const current = readOwner(file);
  if (current === undefined) return;
  if (current === null ? owner !== null : !sameOwner(current, owner ?? null)) return;
  try {
    unlinkSync(file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
}

function isRunning(owner: Owner): boolean {
  if (owner.pid === process.pid) return owner.startedAt === startTime(process.pid);
  try {
    process.kill(owner.pid, 0);
  } catch (error) {
    // EPERM: alive, but another user's.
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  // The same pid with another start time is another process that inherited the number.
  const startedAt = startTime(owner.pid);
  return owner.startedAt === null || startedAt === null || startedAt === owner.startedAt;
}

/** The process's start time in clock ticks since boot (Linux `/proc/<pid>/stat`, field 22); null elsewhere. */
function startTime(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) is in parentheses and may contain spaces.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return fields[19] ?? null;
  } catch {
    return null;
  }
}
