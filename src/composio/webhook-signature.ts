import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Composio's webhook signature (Standard Webhooks headers and content, but the HMAC key is the
 * UTF-8 bytes of the whole secret string — no `whsec_` stripping, no base64 decoding):
 * `v1,` + base64(HMAC-SHA256(secret, `${webhook-id}.${webhook-timestamp}.${raw body}`)).
 *
 * Pure node:crypto: this runs on every incoming webhook, before anything else.
 */

export type SignatureFailure = 'missing_headers' | 'bad_timestamp' | 'stale_timestamp' | 'bad_signature';

export interface VerifyWebhookInput {
  readonly id: string | undefined;
  readonly timestamp: string | undefined;
  /** The `webhook-signature` header: one or more space-separated `v1,<base64>` entries. */
  readonly signatureHeader: string | undefined;
  /** The body exactly as received; re-serialised JSON would not match. */
  readonly rawBody: Buffer | string;
  /** Every secret currently accepted (several during a rotation). */
  readonly secrets: readonly string[];
  readonly nowSeconds: number;
  readonly toleranceSeconds?: number;
}

const SHA256_BYTES = 32;
/** More entries than this in one header is not a rotation, it is noise (or an attack). */
const MAX_SIGNATURES = 16;

export function verifyWebhookSignature(input: VerifyWebhookInput): { ok: true } | { ok: false; reason: SignatureFailure } {
  const { id, timestamp, signatureHeader } = input;
  if (!id || !timestamp || !signatureHeader || input.secrets.length === 0) return { ok: false, reason: 'missing_headers' };
  if (!/^\d{1,15}$/.test(timestamp)) return { ok: false, reason: 'bad_timestamp' };
  const tolerance = input.toleranceSeconds ?? 300;
  if (Math.abs(input.nowSeconds - Number(timestamp)) > tolerance) return { ok: false, reason: 'stale_timestamp' };

  const candidates: Buffer[] = [];
  for (const entry of signatureHeader.trim().split(/\s+/).slice(0, MAX_SIGNATURES)) {
    const comma = entry.indexOf(',');
    if (comma < 0 || entry.slice(0, comma) !== 'v1') continue;
    const encoded = entry.slice(comma + 1);
    const decoded = Buffer.from(encoded, 'base64');
    // Node's base64 decoding is lenient (it skips junk and stops at padding), so only a
    // canonical encoding counts. The length check matters too: timingSafeEqual throws on
    // buffers of different lengths.
    if (decoded.length === SHA256_BYTES && decoded.toString('base64') === encoded) candidates.push(decoded);
  }
  if (candidates.length === 0) return { ok: false, reason: 'bad_signature' };

  const prefix = Buffer.from(`${id}.${timestamp}.`, 'utf8');
  const body = typeof input.rawBody === 'string' ? Buffer.from(input.rawBody, 'utf8') : input.rawBody;
  for (const secret of input.secrets) {
    const expected = createHmac('sha256', Buffer.from(secret, 'utf8')).update(prefix).update(body).digest();
    // Compare against every candidate, without stopping early, so timing says nothing about which matched.
    let matched = false;
    for (const candidate of candidates) matched = timingSafeEqual(expected, candidate) || matched;
    if (matched) return { ok: true };
  }
  return { ok: false, reason: 'bad_signature' };
}

/** The `webhook-signature` value Composio would send for this message (used by the simulator). */
export function signWebhook(input: {
  readonly id: string;
  readonly timestamp: number | string;
  readonly body: string;
  readonly secret: string;
}): string {
  const mac = createHmac('sha256', Buffer.from(input.secret, 'utf8'))
    .update(`${input.id}.${input.timestamp}.${input.body}`, 'utf8')
    .digest('base64');
  return `v1,${mac}`;
}
