import { existsSync } from 'node:fs';
import path from 'node:path';
import { BackupRefused, backupDataFolder, RestoreRefused, restoreDataFolder } from '../../backup/backup.js';
import { KEY_FILE } from '../../data-keys/keys.js';
import { type CliIo, type Command, CommandFailed, cliConfig, UsageError } from './command.js';
import { cliLogger, withEmbeddedServer } from './database.js';

/** The one file the command takes, after its name; `--help` is handled by the command line. */
function fileArgument(args: string[], command: string): string {
  const files = args.filter((arg) => !arg.startsWith('-'));
  const flags = args.filter((arg) => arg.startsWith('-'));
  if (flags.length > 0) throw new UsageError(`unknown option ${flags[0]}`);
  if (files.length !== 1 || files[0]!.trim() === '') throw new UsageError(`${command} takes one file: npm run cli -- ${command} <file>`);
  return path.resolve(files[0]!);
}

const KEEP = 'Keep it where only operators can read it: it holds every installation’s queued events and the database’s password.';

export const backupCommand: Command = {
  name: 'backup',
  summary: 'back up the embedded Postgres and its data folder into one file, while brokers serve',
  usage: `Usage: npm run cli -- backup <file>

Writes DATA_DIR's database (the embedded Postgres, no DATABASE_URL) into <file>, a gzipped tar,
while a broker serves on it (or, with none running, from a Postgres started for the command).
Consistent: everything committed before the backup began is in it. <file> must not exist yet.
${KEEP}
Restore it with \`npm run cli -- restore <file>\` into an empty DATA_DIR.`,

  async run(args, io, env) {
    const file = fileArgument(args, 'backup');
    const config = cliConfig(env);
    if (existsSync(file)) throw new CommandFailed(`${file} already exists; name a new file`);
    const summary = await withEmbeddedServer(config, cliLogger(config, io), 'backup', (url) =>
      backupDataFolder({ dataDir: config.dataDir, url, file, progress: note(io) }),
    ).catch((error: unknown) => {
      throw error instanceof BackupRefused ? new CommandFailed(error.message) : error;
    });
    io.out(
      `backup written to ${file}: ${summary.files} files, ${megabytes(summary.bytes)} MB before compression (WAL ${summary.startLsn} to ${summary.stopLsn})\n`,
    );
    io.err(`${KEEP}\n`);
    const keys = path.join(path.resolve(config.dataDir), KEY_FILE);
    if (existsSync(keys)) {
      io.err(
        `The data key file ${keys} is not in the backup: keep a copy apart from it; the events’ data in the backup cannot be read without it.\n`,
      );
    }
    return 0;
  },
};

export const restoreCommand: Command = {
  name: 'restore',
  summary: 'restore a backup into an empty DATA_DIR',
  usage: `Usage: npm run cli -- restore <file>

Restores <file>, written by \`npm run cli -- backup\`, into DATA_DIR, which must be empty or not
exist yet (a folder holding anything is refused, and left as it is). Start the broker on DATA_DIR
afterwards: its Postgres replays the backup's WAL at first start, and serves the database as it was
when the backup ended — installations, tokens, triggers and queued events.`,

  async run(args, io, env) {
    const file = fileArgument(args, 'restore');
    const config = cliConfig(env);
    if (config.databaseUrl)
      throw new CommandFailed('restore is for the embedded Postgres (no DATABASE_URL); restore an external Postgres with its own tools');
    try {
      const restored = await restoreDataFolder({ dataDir: config.dataDir, file, progress: note(io) });
      io.out(
        `restored ${file} (written by ${restored.release}) into ${path.resolve(config.dataDir)}: ${restored.files} files; start the broker on it\n`,
      );
      return 0;
    } catch (error) {
      if (error instanceof RestoreRefused) throw new CommandFailed(error.message);
      throw error;
    }
  },
};

function note(io: CliIo): (line: string) => void {
  return (line) => io.err(`${line}\n`);
}

function megabytes(bytes: number): string {
  return (bytes / 1024 / 1024).toFixed(1);
}
