/** One CSV record and the line it starts on (quoted fields may span lines). */
export interface CsvRecord {
  readonly line: number;
  readonly fields: string[];
}

export class CsvSyntaxError extends Error {
  constructor(
    readonly line: number,
    message: string,
  ) {
    super(`line ${line}: ${message}`);
    this.name = 'CsvSyntaxError';
  }
}

/**
 * RFC 4180 CSV: comma-separated, `"` quotes fields holding commas, quotes (doubled) or line
 * breaks, CRLF or LF line ends, a leading byte-order mark ignored. Blank lines are skipped.
 */
export function parseCsv(text: string): CsvRecord[] {
  const records: CsvRecord[] = [];
  const input = text.startsWith('\uFEFF') ? text.slice(1) : text;
  let line = 1;
  let recordLine = 1;
  let fields: string[] = [];
  let field = '';
  let quoted = false;
  let fieldStarted = false;

  const endField = () => {
    fields.push(field);
    field = '';
    fieldStarted = false;
  };
  const endRecord = () => {
    endField();
    if (!(fields.length === 1 && fields[0] === '')) records.push({ line: recordLine, fields });
    fields = [];
  };

  for (let i = 0; i < input.length; i += 1) {
    const char = input[i]!;
    if (quoted) {
      if (char === '"') {
        if (input[i + 1] === '"') {
          field += '"';
          i += 1;
        } else {
          quoted = false;
          const next = input[i + 1];
          if (next !== undefined && next !== ',' && next !== '\n' && next !== '\r') {
            throw new CsvSyntaxError(line, 'text after a closing quote; double a quote inside a quoted field ("")');
          }
        }
      } else {
        if (char === '\n') line += 1;
        field += char;
      }
      continue;
    }
    if (char === '"') {
      if (fieldStarted) throw new CsvSyntaxError(line, 'a quote inside an unquoted field; quote the whole field');
      quoted = true;
      fieldStarted = true;
    } else if (char === ',') {
      endField();
    } else if (char === '\n' || char === '\r') {
      if (char === '\r' && input[i + 1] === '\n') i += 1;
      endRecord();
      line += 1;
      recordLine = line;
    } else {
      field += char;
      fieldStarted = true;
    }
  }
  if (quoted) throw new CsvSyntaxError(recordLine, 'a quoted field is never closed');
  endRecord();
  return records;
}
