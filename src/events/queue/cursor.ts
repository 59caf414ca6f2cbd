import { createHash } from 'node:crypto';
import { badRequest } from '../../errors.js';

/**
 * A cursor names a position in one installation's queue. It is opaque to clients: 8 bytes of
 * position and 8 bytes of a tag binding it to its installation, base64url. The tag is not a
 * secret (a client can only ever address its own queue); it turns another installation's cursor,
 * or a corrupted one, into a clear `400` instead of a silent jump.
 */

const POSITION_BYTES = 8;
const TAG_BYTES = 8;
const CURSOR_PATTERN = /^[A-Za-z0-9_-]{22}$/;

/**
 * The cursors made or read lately, both ways: a poll that finds nothing answers the cursor it was
 * given, so most cursors are made and read again and again, and each costs a SHA-256 otherwise.
 * Bounded by being dropped whole once it holds `REMEMBERED` of them.
 */
const REMEMBERED = 100_000;
const cursorOf = new Map<string, string>();
const positionOf = new Map<string, { readonly installationId: string; readonly position: number }>();

function remember(installationId: string, position: number, cursor: string): void {
  if (positionOf.size >= REMEMBERED) {
    cursorOf.clear();
    positionOf.clear();
  }
  cursorOf.set(`${installationId}:${position}`, cursor);
  positionOf.set(cursor, { installationId, position });
}

export function encodeCursor(installationId: string, position: number): string {
  const known = cursorOf.get(`${installationId}:${position}`);
  if (known !== undefined) return known;
  const bytes = Buffer.alloc(POSITION_BYTES + TAG_BYTES);
  bytes.writeBigUInt64BE(BigInt(position), 0);
  tag(installationId, position).copy(bytes, POSITION_BYTES);
  const cursor = bytes.toString('base64url');
  remember(installationId, position, cursor);
  return cursor;
}

/** The position a cursor names, or `400 invalid_cursor` for anything this installation never got. */
export function decodeCursor(installationId: string, cursor: string): number {
  const known = positionOf.get(cursor);
  if (known !== undefined && known.installationId === installationId) return known.position;
  if (CURSOR_PATTERN.test(cursor)) {
    const bytes = Buffer.from(cursor, 'base64url');
    // Canonical only: the last character's unused bits must not make a second spelling.
    if (bytes.length === POSITION_BYTES + TAG_BYTES && bytes.toString('base64url') === cursor) {
      const position = bytes.readBigUInt64BE(0);
      if (position <= BigInt(Number.MAX_SAFE_INTEGER)) {
        const value = Number(position);
        if (tag(installationId, value).equals(bytes.subarray(POSITION_BYTES))) {
          remember(installationId, value, cursor);
          return value;
        }
      }
    }
  }
  throw invalidCursor();
}

const invalidCursor = () => badRequest('cursor is not one this installation was given', 'invalid_cursor');

function tag(installationId: string, position: number): Buffer {
  return createHash('sha256').update(`omb-cursor:${installationId}:${position}`).digest().subarray(0, TAG_BYTES);
}
