import { runCli } from './cli/run.js';

/** `npm run cli -- <command> [options]`: the operator CLI in its own process (see cli/run.ts). */
process.exitCode = await runCli(
  process.argv.slice(2),
  { out: (text) => process.stdout.write(text), err: (text) => process.stderr.write(text) },
  process.env,
);
