import { mkdir, readdir, readFile, rm, stat, truncate, writeFile } from 'node:fs/promises';
import path from 'node:path';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runningEmbeddedUrl } from '../../src/db/embedded.js';
import { BROKER_ENV, insertTrigger, signed, type TestTrigger, triggerMessage } from '../events/helpers.js';
import { type BrokerProcess, startBroker } from '../support/broker-process.js';
import { type DataFolders, prepareDataFolders } from '../support/data-folder.js';
import { drainOver, type Registered, registerOver } from '../support/http.js';
import { runCli } from './support.js';

/**
 * `npm run cli -- backup` of the embedded default while a broker serves and webhooks arrive, and
 * `restore` into an empty folder: the restored broker knows the installation's token and holds
 * every event answered `200 accepted` before the backup began.
 */

let folders: DataFolders;
let work: string;
const cleanups: Array<() => Promise<unknown>> = [];

beforeAll(async () => {
  folders = await prepareDataFolders('omb-backup-');
  work = await folders.empty();
}, 120_000);

afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
  await folders?.remove();
});

/** Each sender's pause between its webhooks: some 150 a second from the three together. */
const PACE_MS = 20;

async function started(dataDir: string): Promise<BrokerProcess> {
  const broker = await startBroker({ ...BROKER_ENV, DATA_DIR: dataDir, QUOTA_STANDARD: '100000' });
  cleanups.push(() => broker.stop());
  return broker;
}

describe('backup and restore of the embedded default', () => {
  let dataDir: string;
  let broker: BrokerProcess;
  let owner: Registered;
  let trigger: TestTrigger;
  let backupFile: string;

  beforeAll(async () => {
    dataDir = await folders.copy();
    broker = await started(dataDir);
    owner = await registerOver(broker.url);
    const sql = postgres(runningEmbeddedUrl(dataDir)!, { max: 1, onnotice: () => {} });
    try {
      trigger = await insertTrigger({ sql } as never, owner.installationId);
    } finally {
      await sql.end();
    }
    backupFile = path.join(work, 'broker.tar.gz');
  }, 120_000);

  it('backs up while webhooks arrive; the restored broker holds every event accepted before the backup began', async () => {
    const accepted: Array<{ id: string; at: number }> = [];
    let sending = true;
    let n = 0;
    const sender = async () => {
      while (sending) {
        const webhook = signed(triggerMessage(trigger, { n: n++ }));
        const response = await fetch(`${broker.url}/v1/webhooks/composio`, {
          method: 'POST',
          headers: webhook.headers,
          body: webhook.body,
        });
        const body = (await response.json()) as { outcome?: string };
        expect(response.status).toBe(200);
        if (body.outcome === 'accepted') accepted.push({ id: webhook.id, at: performance.now() });
        // Paced: webhooks keep arriving while the backup runs, without taking the processor from it.
        await new Promise((resolve) => setTimeout(resolve, PACE_MS));
      }
    };
    const senders = Array.from({ length: 3 }, sender);
    while (accepted.length < 60) await new Promise((resolve) => setTimeout(resolve, 20));

    const began = performance.now();
    const backup = await runCli(['backup', backupFile], { DATA_DIR: dataDir });
    const acceptedDuring = accepted.filter((a) => a.at > began).length;
    sending = false;
    await Promise.all(senders);
    expect(backup.stderr).toContain('Keep it where only operators can read it');
    // This broker has DATA_ENCRYPTION_KEYS (the tests' key): no key file to keep apart.
    expect(backup.stderr).not.toContain('data key file');
    expect(backup).toMatchObject({ code: 0 });
    expect(backup.stdout).toMatch(/^backup written to .*broker\.tar\.gz: \d+ files/);
    expect(acceptedDuring, 'webhooks went on being accepted while the backup ran').toBeGreaterThan(0);
    expect((await stat(backupFile)).mode & 0o777).toBe(0o600);
    expect(await readdir(work)).not.toContain('broker.tar.gz.partial');

    const before = accepted.filter((a) => a.at <= began).map((a) => a.id);
    await broker.stop();

    // An empty folder (as the broker's own, where Postgres's user can reach it).
    const restoredDir = await folders.empty();
    const restore = await runCli(['restore', backupFile], { DATA_DIR: restoredDir });
    expect(restore).toMatchObject({ code: 0, stderr: '' });
    expect(restore.stdout).toContain(`into ${restoredDir}`);
    expect(await readdir(restoredDir)).not.toContain('broker.pid');

    const restored = await started(restoredDir);
    const me = await fetch(`${restored.url}/v1/me`, { headers: owner.auth });
    expect(me.status).toBe(200);
    expect(((await me.json()) as { installationId: string }).installationId).toBe(owner.installationId);
    const ids = new Set(await drainOver(restored.url, owner));
    expect(before.filter((id) => !ids.has(id))).toEqual([]);
    await restored.stop();
  }, 120_000);

  it('restores only into an empty folder, leaving a folder that holds anything as it was', async () => {
    const full = path.join(work, 'full');
    await mkdir(full);
    await writeFile(path.join(full, 'note.txt'), 'kept');
    const refused = await runCli(['restore', backupFile], { DATA_DIR: full });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`DATA_DIR ${full} is not empty`);
    expect(await readdir(full)).toEqual(['note.txt']);
    expect(await readFile(path.join(full, 'note.txt'), 'utf8')).toBe('kept');
  });

  it('refuses a cut-short backup and leaves nothing behind', async () => {
    const cut = path.join(work, 'cut.tar.gz');
    await writeFile(cut, await readFile(backupFile));
    await truncate(cut, Math.floor((await stat(cut)).size / 2));
    const target = path.join(work, 'from-cut');
    const refused = await runCli(['restore', cut], { DATA_DIR: target });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/cannot be restored|incomplete/);
    await expect(stat(target)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('refuses a file that is not a backup, a folder, and a backup over an existing file', async () => {
    const other = path.join(work, 'other.tar.gz');
    await writeFile(other, 'not a backup');
    const refused = await runCli(['restore', other], { DATA_DIR: path.join(work, 'from-other') });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('cannot be restored');

    // A folder given for the file: reading it failed outside the restore and stopped the process.
    const folder = await runCli(['restore', work], { DATA_DIR: path.join(work, 'from-folder') });
    expect(folder.code).toBe(1);
    expect(folder.stderr).toContain(`${work} is not a file: name the backup file itself`);
    await expect(stat(path.join(work, 'from-folder'))).rejects.toMatchObject({ code: 'ENOENT' });

    const over = await runCli(['backup', backupFile], { DATA_DIR: dataDir });
    expect(over.code).toBe(1);
    expect(over.stderr).toContain('already exists');
  });

  it('refuses at once a file it cannot write, beginning no backup, and leaves a partial file it did not make', async () => {
    // It used to begin the backup, then wait for ever on a file that could not be opened.
    const nowhere = path.join(work, 'no-such-folder', 'broker.tar.gz');
    const missing = await runCli(['backup', nowhere], { DATA_DIR: dataDir });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain(`cannot write ${nowhere}: the folder ${path.dirname(nowhere)} does not exist`);
    expect(missing.stderr).not.toContain('backup started');

    const stopped = path.join(work, 'stopped.tar.gz');
    await writeFile(`${stopped}.partial`, 'left by a backup that was killed');
    const left = await runCli(['backup', stopped], { DATA_DIR: dataDir });
    expect(left.code).toBe(1);
    expect(left.stderr).toContain(`${stopped}.partial exists, left by a backup that did not finish`);
    expect(await readFile(`${stopped}.partial`, 'utf8')).toBe('left by a backup that was killed');

    const unnamed = await runCli(['backup', ''], { DATA_DIR: dataDir });
    expect(unnamed.code).toBe(2);
    expect(unnamed.stderr).toContain('backup takes one file');
  });

  it('leaves an external Postgres to its own tools', async () => {
    const refused = await runCli(['backup', path.join(work, 'external.tar.gz')], { DATABASE_URL: 'postgres://omb@127.0.0.1:9/omb' });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('is for the embedded Postgres');
    await rm(path.join(work, 'external.tar.gz'), { force: true });
  });
});
