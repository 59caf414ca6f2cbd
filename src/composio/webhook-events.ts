import { z } from 'zod';

/**
 * The V3 webhook payloads the broker routes, narrowed to what it reads. Parse only after the
 * signature has been verified. Other `composio.*` event types parse as `other`, so a new
 * Composio event never makes the broker answer with an error Composio would retry.
 */

export type WebhookEvent =
  | {
      readonly type: 'composio.trigger.message';
      /** The V3 message id; the `webhook-id` header carries the delivery id. */
      readonly id: string;
      readonly timestamp: string;
      readonly triggerId: string;
      readonly triggerSlug: string;
      readonly connectedAccountId: string;
      readonly userId: string;
      readonly data: Record<string, unknown>;
    }
  | {
      readonly type: 'composio.connected_account.expired';
      readonly id: string;
      readonly timestamp: string;
      readonly connectedAccountId: string;
      /** Deprecated by Composio and absent from its documented expiry: never used to route. */
      readonly userId: string | null;
      readonly toolkit: string | null;
    }
  | {
      readonly type: 'composio.trigger.disabled';
      readonly id: string;
      readonly timestamp: string;
      /** The `ti_…` id Composio stopped: the only thing that routes it. */
      readonly triggerId: string;
      /** `data.disabled_reason` as Composio sent it (`connection_expired`, `subscription_auth_failure`, …). */
      readonly reason: string;
    }
  | { readonly type: 'other'; readonly id: string; readonly timestamp: string; readonly eventType: string };

/**
 * A JSON object, taken as it is: the fields the broker reads are checked below, and the rest is
 * stored from the delivery's text (a record schema would copy every member of `data` first).
 */
const JsonObject = z.custom<Record<string, unknown>>((value) => typeof value === 'object' && value !== null && !Array.isArray(value));

const Envelope = z.object({
  id: z.string().min(1),
  timestamp: z.string().min(1),
  type: z.string().startsWith('composio.'),
  metadata: JsonObject,
  data: JsonObject,
});

const TriggerMessageMetadata = z.object({
  trigger_id: z.string().min(1),
  trigger_slug: z.string().min(1),
  connected_account_id: z.string().min(1),
  user_id: z.string().min(1),
});

/**
 * `data` is the connected-account object as `GET /connected_accounts/{id}` returns it. Its
 * `user_id` is deprecated, and the expiry in Composio's docs has none: only the id is required.
 */
const ExpiredAccount = z.object({
  id: z.string().min(1),
  user_id: z.string().min(1).nullish().catch(undefined),
  toolkit: z.object({ slug: z.string() }).optional(),
});

/**
 * `composio.trigger.disabled`: Composio stopped a trigger by itself. Its documented part is
 * `data.disabled_reason`; the trigger's id is read from `data.trigger_id`, else `data.id`, else
 * `metadata.trigger_id`, as the docs do not fix which of them carries it. A reason Composio adds
 * later is kept as sent (bounded); a missing one is `unknown`.
 */
const DisabledTrigger = z.object({
  trigger_id: z.string().min(1).optional().catch(undefined),
  id: z.string().min(1).optional().catch(undefined),
  disabled_reason: z.string().min(1).max(100).optional().catch(undefined),
});
const DisabledTriggerMetadata = z.object({ trigger_id: z.string().min(1).optional().catch(undefined) });

export function parseWebhookEvent(
  rawBody: Buffer | string,
): { ok: true; event: WebhookEvent } | { ok: false; reason: 'invalid_json' | 'invalid_payload' } {
  let json: unknown;
  try {
    json = JSON.parse(typeof rawBody === 'string' ? rawBody : rawBody.toString('utf8'));
  } catch {
    return { ok: false, reason: 'invalid_json' };
  }
  const envelope = Envelope.safeParse(json);
  if (!envelope.success) return { ok: false, reason: 'invalid_payload' };
  const { id, timestamp, type, metadata, data } = envelope.data;

  if (type === 'composio.trigger.message') {
    const meta = TriggerMessageMetadata.safeParse(metadata);
    if (!meta.success) return { ok: false, reason: 'invalid_payload' };
    return {
      ok: true,
      event: {
        type,
        id,
        timestamp,
        triggerId: meta.data.trigger_id,
        triggerSlug: meta.data.trigger_slug,
        connectedAccountId: meta.data.connected_account_id,
        userId: meta.data.user_id,
        data,
      },
    };
  }
  if (type === 'composio.connected_account.expired') {
    const account = ExpiredAccount.safeParse(data);
    if (!account.success) return { ok: false, reason: 'invalid_payload' };
    return {
      ok: true,
      event: {
        type,
        id,
        timestamp,
        connectedAccountId: account.data.id,
        userId: account.data.user_id ?? null,
        toolkit: account.data.toolkit?.slug ?? null,
      },
    };
  }
  if (type === 'composio.trigger.disabled') {
    const fields = DisabledTrigger.parse(data);
    const triggerId = fields.trigger_id ?? fields.id ?? DisabledTriggerMetadata.parse(metadata).trigger_id;
    if (triggerId === undefined) return { ok: false, reason: 'invalid_payload' };
    return { ok: true, event: { type, id, timestamp, triggerId, reason: fields.disabled_reason ?? 'unknown' } };
  }
  return { ok: true, event: { type: 'other', id, timestamp, eventType: type } };
}
