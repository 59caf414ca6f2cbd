import { parseCsv } from './csv.js';

export type ImportFormat = 'json' | 'csv';

/**
 * One exported row as read from the file, before validation, or why it could not be read as a
 * row. `where` places it for messages: `line 7` (CSV) or `entry 3` (JSON).
 */
export type ExportedRecord =
  | { readonly where: string; readonly values: Record<string, unknown> }
  | { readonly where: string; readonly problem: string };

/**
 * The first version exported `id, token_hash, composio_user_id, session_id, created_at,
 * last_seen_at, disabled_at`; the last three may be left out, other columns are ignored.
 */
const REQUIRED_COLUMNS = ['id', 'token_hash', 'composio_user_id', 'created_at'];

/** The format named by `--format`, else by the file's extension, else by its first character. */
export function detectFormat(file: string, text: string, requested?: ImportFormat): ImportFormat {
  if (requested !== undefined) return requested;
  if (/\.json$/i.test(file)) return 'json';
  if (/\.csv$/i.test(file)) return 'csv';
  return text.trimStart().startsWith('[') ? 'json' : 'csv';
}

/**
 * The file's rows. A problem with the file as a whole (not JSON, no header, a required column
 * missing) throws; a problem with one row is left for validation to report by its place.
 */
export function readExportedRecords(text: string, format: ImportFormat): ExportedRecord[] {
  return format === 'json' ? fromJson(text) : fromCsv(text);
}

function fromJson(text: string): ExportedRecord[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new Error(`the file is not valid JSON (${(error as Error).message})`);
  }
  if (!Array.isArray(parsed)) throw new Error('the JSON file must hold an array of installation rows');
  return parsed.map((item: unknown, index) => {
    const where = `entry ${index + 1}`;
    if (typeof item !== 'object' || item === null || Array.isArray(item)) return { where, problem: 'is not an object' };
    return { where, values: item as Record<string, unknown> };
  });
}

function fromCsv(text: string): ExportedRecord[] {
  const [header, ...rows] = parseCsv(text);
  if (!header) throw new Error('the CSV file is empty; it needs a header row naming the columns');
  const columns = header.fields.map((name) => name.trim().toLowerCase());
  const missing = REQUIRED_COLUMNS.filter((column) => !columns.includes(column));
  if (missing.length > 0) throw new Error(`the CSV header lacks the column${missing.length > 1 ? 's' : ''} ${missing.join(', ')}`);
  return rows.map((row) => {
    if (row.fields.length !== columns.length) {
      return { where: `line ${row.line}`, problem: `has ${row.fields.length} fields where the header has ${columns.length}` };
    }
    // An empty CSV field is an absent value, as NULL exports as nothing.
    const values = Object.fromEntries(columns.map((column, i) => [column, row.fields[i] === '' ? null : row.fields[i]]));
    return { where: `line ${row.line}`, values };
  });
}
