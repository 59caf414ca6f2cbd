import { readFile } from 'node:fs/promises';
import { detectFormat, type ExportedRecord, readExportedRecords } from '../import/records.js';
import { checkRows } from '../import/rows.js';
import { importInstallations } from '../import/store.js';
import { type Command, CommandFailed, cliConfig, cliOperator, parseOptions, requireOption, UsageError } from './command.js';
import { cliLogger, describeTarget, withBrokerDatabase } from './database.js';

export const importInstallationsCommand: Command = {
  name: 'import',
  summary: 'import installations exported from the first version (their tokens keep working)',
  usage: `Usage: npm run cli -- import --file F [--format json|csv] [--dry-run] [--as NAME]

  --file F        the export: a JSON array of objects, or CSV with a header row
  --format        json or csv (default: from the file's extension, else its first character)
  --dry-run       check everything, against the database too, and write nothing
  --as NAME       who you are, for the audit trail (default: your login name)

Columns: id, token_hash, composio_user_id, created_at, and optionally session_id,
last_seen_at, disabled_at. Times are ISO 8601 (no zone means UTC) or Unix seconds/milliseconds.
Every row is checked (a UUID id, a 64-hex token_hash, composio_user_id = omb_<id without
dashes>); valid rows are inserted in one transaction, rows whose id is already here are
skipped, and invalid rows are listed by line (CSV) or entry (JSON) and left out. Only token
hashes move, so the installations' existing tokens keep working. Exits 1 when any row was
left out as invalid.`,

  async run(args, io, env) {
    const { values } = parseOptions(args, {
      file: { type: 'string' },
      format: { type: 'string' },
      'dry-run': { type: 'boolean' },
      as: { type: 'string' },
    });
    const operator = cliOperator(values.as, env);
    const file = requireOption(values.file, '--file');
    const format = values.format;
    if (format !== undefined && format !== 'json' && format !== 'csv') throw new UsageError('--format must be json or csv');
    const dryRun = values['dry-run'] ?? false;
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (error) {
      throw new CommandFailed(`cannot read ${file}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`);
    }
    let records: ExportedRecord[];
    try {
      records = readExportedRecords(text, detectFormat(file, text, format));
    } catch (error) {
      throw new CommandFailed(`${file}: ${(error as Error).message}`);
    }

    const checked = checkRows(records, new Date());
    const config = cliConfig(env);
    const outcome = await withBrokerDatabase(config, cliLogger(config, io), (database) =>
      importInstallations(database.db, checked.valid, {
        dryRun,
        audit: { actor: { operator, tokenId: null, source: 'cli' }, at: new Date(), file, invalid: checked.invalid.length },
      }),
    );

    // Row places and reasons only: a token hash is as good as a token for a lookup, so none is printed.
    const invalid = [...checked.invalid, ...outcome.refused];
    for (const { where, problem } of invalid) io.err(`${where}: ${problem}\n`);
    const verb = dryRun ? 'would import' : 'imported';
    io.out(
      `${verb} ${outcome.imported}, skipped ${outcome.skipped.length} (already present), invalid ${invalid.length}` +
        ` — ${records.length} rows from ${file} into ${describeTarget(config)}${dryRun ? ' (dry run: nothing written)' : ''}\n`,
    );
    return invalid.length > 0 ? 1 : 0;
  },
};
