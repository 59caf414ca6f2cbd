import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DataDirInUseError, lockDataDir } from './data-dir-lock.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'omb-lock-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const lockFile = () => path.join(dir, 'broker.pid');
const startTimeOf = (pid: number) => {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
};

describe('lockDataDir', () => {
  it('holds the folder with this pid, refuses a second holder while held, and lets go on release', () => {
    const lock = lockDataDir(dir);
    expect(readFileSync(lockFile(), 'utf8').split('\n')[0]).toBe(String(process.pid));
    expect(() => lockDataDir(dir)).toThrow(DataDirInUseError);
    lock.release();
    expect(existsSync(lockFile())).toBe(false);
    lockDataDir(dir).release();
  });

  it('refuses while another live process holds it, naming the folder and its pid', async () => {
    const other = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 30000)'], { stdio: 'ignore' });
    try {
      await new Promise((resolve) => other.once('spawn', resolve));
      writeFileSync(lockFile(), `${other.pid}\n${startTimeOf(other.pid!)}\n`);
      expect(() => lockDataDir(dir)).toThrow(`the data folder ${path.resolve(dir)} is in use by a running broker (pid ${other.pid})`);
    } finally {
      other.kill('SIGKILL');
    }
  });

  it('takes over the lock of a dead process, of a pid now used by another process, and an unreadable one', async () => {
    const gone = spawn(process.execPath, ['-e', ''], { stdio: 'ignore' });
    const pid = await new Promise<number>((resolve) => gone.once('exit', () => resolve(gone.pid!)));
    writeFileSync(lockFile(), `${pid}\n123\n`);
    lockDataDir(dir).release();

    // A live pid with another start time: the number was reused after the owner died.
    writeFileSync(lockFile(), `${process.ppid}\n1\n`);
    lockDataDir(dir).release();

    writeFileSync(lockFile(), 'not a pid');
    const lock = lockDataDir(dir);
    expect(readFileSync(lockFile(), 'utf8').split('\n')[0]).toBe(String(process.pid));
    lock.release();
  });
});
