import { composioUserIdFor } from '../../installations/tokens.js';
import type { ExportedRecord } from './records.js';

/** An installation from the first version, checked and ready to insert. */
export interface FirstVersionInstallation {
  readonly id: string;
  readonly tokenHash: string;
  readonly composioUserId: string;
  readonly sessionId: string | null;
  readonly createdAt: Date;
  readonly lastSeenAt: Date;
  readonly disabledAt: Date | null;
}

export interface CheckedRows {
  readonly valid: { where: string; row: FirstVersionInstallation }[];
  /** Each refused row's place and why; never a value that could be a credential. */
  readonly invalid: { where: string; problem: string }[];
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const SHA256_HEX = /^[0-9a-f]{64}$/;
const SESSION_ID = /^[\x21-\x7e]{1,256}$/;
/** `2024-05-01T10:00:00Z`, `2024-05-01 10:00:00.123+00`, `2024-05-01 10:00:00` (UTC, as SQLite writes it). */
const TIMESTAMP = /^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?)\s*(Z|[+-]\d{2}(?::?\d{2})?)?$/i;
const EARLIEST = Date.UTC(2000, 0, 1);

/**
 * Checks every row and the file as a whole: a second row with an id or token hash seen before
 * is refused, so one file cannot make two installations answer to one token.
 */
export function checkRows(records: readonly ExportedRecord[], now: Date): CheckedRows {
  const valid: CheckedRows['valid'] = [];
  const invalid: CheckedRows['invalid'] = [];
  const seenIds = new Map<string, string>();
  const seenHashes = new Map<string, string>();
  for (const record of records) {
    if ('problem' in record) {
      invalid.push({ where: record.where, problem: record.problem });
      continue;
    }
    const checked = checkRow(record.values, now);
    if (typeof checked === 'string') {
      invalid.push({ where: record.where, problem: checked });
      continue;
    }
    const sameId = seenIds.get(checked.id);
    const sameHash = seenHashes.get(checked.tokenHash);
    if (sameId) invalid.push({ where: record.where, problem: `repeats the id of ${sameId}` });
    else if (sameHash) invalid.push({ where: record.where, problem: `repeats the token_hash of ${sameHash}` });
    else {
      seenIds.set(checked.id, record.where);
      seenHashes.set(checked.tokenHash, record.where);
      valid.push({ where: record.where, row: checked });
    }
  }
  return { valid, invalid };
}

/** The row, or the first problem with it. */
function checkRow(values: Record<string, unknown>, now: Date): FirstVersionInstallation | string {
  const id = text(values.id)?.toLowerCase();
  if (!id || !UUID.test(id)) return 'id must be a UUID';
  const tokenHash = text(values.token_hash)?.toLowerCase();
  if (!tokenHash || !SHA256_HEX.test(tokenHash)) return 'token_hash must be a SHA-256 in 64 hexadecimal characters';
  const composioUserId = text(values.composio_user_id);
  if (composioUserId !== composioUserIdFor(id)) return 'composio_user_id must be omb_ followed by the id without dashes';
  const sessionId = text(values.session_id) ?? null;
  if (sessionId !== null && !SESSION_ID.test(sessionId)) return 'session_id must be 1–256 printable characters without spaces';

  const createdAt = timestamp(values.created_at, now);
  if (createdAt === undefined) return 'created_at is required';
  if (createdAt === null) return 'created_at must be a date and time (ISO 8601 or Unix seconds/milliseconds)';
  const lastSeenAt = timestamp(values.last_seen_at, now);
  if (lastSeenAt === null) return 'last_seen_at must be a date and time, or empty';
  const disabledAt = timestamp(values.disabled_at, now);
  if (disabledAt === null) return 'disabled_at must be a date and time, or empty';
  return {
    id,
    tokenHash,
    composioUserId,
    sessionId,
    createdAt,
    // A row never seen since its creation was last seen then.
    lastSeenAt: lastSeenAt ?? createdAt,
    disabledAt: disabledAt ?? null,
  };
}

function text(value: unknown): string | undefined {
  if (typeof value !== 'string') return undefined;
  const trimmed = value.trim();
  return trimmed === '' ? undefined : trimmed;
}

/** `undefined` when absent, `null` when present but not a plausible time. */
function timestamp(value: unknown, now: Date): Date | null | undefined {
  if (value === undefined || value === null || (typeof value === 'string' && value.trim() === '')) return undefined;
  let at: Date;
  if (typeof value === 'number' || (typeof value === 'string' && /^\d+(\.\d+)?$/.test(value.trim()))) {
    const number = Number(value);
    // Seconds until the year 5138; a larger number can only be milliseconds.
    at = new Date(number < 1e11 ? number * 1000 : number);
  } else if (typeof value === 'string') {
    const match = TIMESTAMP.exec(value.trim());
    if (!match) return null;
    const zone = match[3] ?? 'Z';
    const offset = /^[+-]\d{2}$/.test(zone)
      ? `${zone}:00`
      : /^[+-]\d{4}$/.test(zone)
        ? `${zone.slice(0, 3)}:${zone.slice(3)}`
        : zone.toUpperCase();
    at = new Date(`${match[1]}T${match[2]}${offset}`);
  } else {
    return null;
  }
  const ms = at.getTime();
  // A day of slack for clocks; anything outside is a unit or format mistake.
  if (Number.isNaN(ms) || ms < EARLIEST || ms > now.getTime() + 86_400_000) return null;
  return at;
}
