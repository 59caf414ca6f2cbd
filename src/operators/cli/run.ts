import { backupCommand, restoreCommand } from './backup.js';
import { type CliEnv, type CliIo, type Command, CommandFailed, UsageError } from './command.js';
import { dataKeysRotateCommand, dataKeysStatusCommand } from './data-keys.js';
import { importInstallationsCommand } from './import.js';
import { keysGenerate } from './keys.js';
import { auditCommand, grantList, installationList, installationShow } from './lookups.js';
import { migrate } from './migrate.js';
import { adminToken, grantIssue } from './tokens.js';
import { webhookRotateSecret, webhookSubscribe } from './webhook.js';

/**
 * The operators' command line: `npm run cli -- <command> [options]`. Exit codes: 0 done,
 * 1 the command failed (one line on stderr says why), 2 it was called wrongly.
 */
export const COMMANDS: readonly Command[] = [
  keysGenerate,
  grantIssue,
  adminToken,
  migrate,
  backupCommand,
  restoreCommand,
  dataKeysStatusCommand,
  dataKeysRotateCommand,
  importInstallationsCommand,
  webhookSubscribe,
  webhookRotateSecret,
  installationShow,
  installationList,
  grantList,
  auditCommand,
];

const HELP = `omb-broker operator CLI

Usage: npm run cli -- <command> [options]

Commands:
${COMMANDS.map((c) => `  ${c.name.padEnd(22)} ${c.summary}`).join('\n')}

Run \`npm run cli -- <command> --help\` for a command's options. Configuration (DATABASE_URL,
DATA_DIR, OPERATOR_ISSUER, …) comes from the environment, as for the broker.
`;

/**
 * Runs one command line and resolves with its exit code. Commands read their configuration from
 * `env` alone and write only through `io`, so the CLI runs as well inside a test as in its own process.
 */
export async function runCli(argv: string[], io: CliIo, env: CliEnv): Promise<number> {
  if (argv.length === 0 || argv[0] === '--help' || argv[0] === '-h' || argv[0] === 'help') {
    io.out(HELP);
    return argv.length === 0 ? 2 : 0;
  }
  const command = COMMANDS.find((c) => {
    const words = c.name.split(' ');
    return words.every((word, i) => argv[i] === word);
  });
  if (!command) {
    const group = groupOf(argv[0]!);
    if (group.length > 0) {
      // `keys`, `keys --help`: the group's own commands, as the whole CLI's help lists them all.
      const asked = argv.length === 2 && (argv[1] === '--help' || argv[1] === '-h');
      if (argv.length === 1 || asked) {
        io.out(groupHelp(argv[0]!, group));
        return asked ? 0 : 2;
      }
      io.err(`omb-cli: unknown command "${argv.slice(0, 2).join(' ')}"; run \`npm run cli -- ${argv[0]} --help\` to see its commands\n`);
      return 2;
    }
    io.err(`omb-cli: unknown command "${argv.slice(0, 2).join(' ')}"; run with --help to see the commands\n`);
    return 2;
  }
  const args = argv.slice(command.name.split(' ').length);
  if (args.includes('--help') || args.includes('-h')) {
    io.out(`${command.usage}\n`);
    return 0;
  }
  try {
    return await command.run(args, io, env);
  } catch (error) {
    if (error instanceof UsageError) {
      io.err(`omb-cli ${command.name}: ${error.message} (see --help)\n`);
      return 2;
    }
    const message = error instanceof CommandFailed ? error.message : `unexpected error: ${(error as Error).message ?? String(error)}`;
    io.err(`omb-cli ${command.name}: ${message.split('\n')[0]}\n`);
    return 1;
  }
}

/** The commands of a group: those whose name has more than one word and starts with `word`. */
function groupOf(word: string): Command[] {
  return COMMANDS.filter((c) => {
    const words = c.name.split(' ');
    return words.length > 1 && words[0] === word;
  });
}

function groupHelp(group: string, commands: readonly Command[]): string {
  return `Usage: npm run cli -- ${group} <command> [options]

Commands:
${commands.map((c) => `  ${c.name.padEnd(22)} ${c.summary}`).join('\n')}

Run \`npm run cli -- ${group} <command> --help\` for a command's options.
`;
}
