import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signWebhook, type VerifyWebhookInput, verifyWebhookSignature } from '../../src/composio/index.js';
import { type Received, startReceiver } from '../sim/receiver.js';
import { connectAccount, type Harness, startHarness } from './harness.js';

/**
 * Webhook signatures: what the simulator delivers verifies, every tampering is refused, and an
 * independent implementation (`standardwebhooks` in raw-key mode) agrees both ways.
 */

let h: Harness;
let receiver: Awaited<ReturnType<typeof startReceiver>>;
let secret: string;
let delivery: Received;
const now = () => Math.floor(Date.now() / 1000);

function inputOf(d: Received, secrets: readonly string[]): VerifyWebhookInput {
  return {
    id: d.headers['webhook-id'] as string,
    timestamp: d.headers['webhook-timestamp'] as string,
    signatureHeader: d.headers['webhook-signature'] as string,
    rawBody: d.body,
    secrets,
    nowSeconds: now(),
  };
}

beforeAll(async () => {
  h = await startHarness();
  receiver = await startReceiver();
  secret = (await h.gateway.setWebhookSubscription(receiver.url)).secret ?? '';
  const { accountId } = await connectAccount(h, 'omb_user1', 'gmail', 'work');
  const { triggerId } = await h.gateway.upsertTrigger({
    userId: 'omb_user1',
    slug: 'GMAIL_NEW_GMAIL_MESSAGE',
    connectedAccountId: accountId,
    config: {},
  });
  const result = await h.sim.controls.fireTrigger(triggerId, { subject: 'Grüße ✓', sender: 'ada@example.com' });
  expect(result).toMatchObject({ ok: true, status: 200 });
  delivery = receiver.received[0] as Received;
});
afterAll(async () => {
  await h.close();
  await receiver.close();
});

describe('deliveries from the simulator', () => {
  it('carry Composio’s headers', () => {
    expect(delivery.headers).toMatchObject({
      'content-type': 'application/json',
      'webhook-id': expect.stringMatching(/^msg_/),
      'webhook-timestamp': expect.stringMatching(/^\d+$/),
      'webhook-signature': expect.stringMatching(/^v1,[A-Za-z0-9+/]+=*$/),
      'x-composio-webhook-version': 'V3',
    });
    expect(Math.abs(Number(delivery.headers['webhook-timestamp']) - now())).toBeLessThan(5);
  });

  it('verify with the subscription’s secret', () => {
    expect(verifyWebhookSignature(inputOf(delivery, [secret]))).toEqual({ ok: true });
  });

  it('verify during a rotation, whichever position the right secret has', () => {
    expect(verifyWebhookSignature(inputOf(delivery, ['an-older-secret', secret]))).toEqual({ ok: true });
    expect(verifyWebhookSignature(inputOf(delivery, [secret, 'a-newer-secret']))).toEqual({ ok: true });
  });
});

describe('tampering is refused', () => {
  it('one byte of the body changed', () => {
    const body = Buffer.from(delivery.body);
    body[body.length - 2] = (body[body.length - 2] ?? 0) ^ 0x01;
    expect(verifyWebhookSignature({ ...inputOf(delivery, [secret]), rawBody: body })).toEqual({ ok: false, reason: 'bad_signature' });
  });

  it('the wrong secret', () => {
    expect(verifyWebhookSignature(inputOf(delivery, ['not-the-secret']))).toEqual({ ok: false, reason: 'bad_signature' });
  });

  it('another message id or timestamp', () => {
    const input = inputOf(delivery, [secret]);
    expect(verifyWebhookSignature({ ...input, id: `${input.id}x` })).toEqual({ ok: false, reason: 'bad_signature' });
    expect(verifyWebhookSignature({ ...input, timestamp: String(Number(input.timestamp) + 1) })).toEqual({
      ok: false,
      reason: 'bad_signature',
    });
  });

  it('a stale or future timestamp', () => {
    const input = inputOf(delivery, [secret]);
    const ts = Number(input.timestamp);
    expect(verifyWebhookSignature({ ...input, nowSeconds: ts + 301 })).toEqual({ ok: false, reason: 'stale_timestamp' });
    expect(verifyWebhookSignature({ ...input, nowSeconds: ts - 301 })).toEqual({ ok: false, reason: 'stale_timestamp' });
    expect(verifyWebhookSignature({ ...input, nowSeconds: ts + 300 })).toEqual({ ok: true });
    expect(verifyWebhookSignature({ ...input, nowSeconds: ts + 60, toleranceSeconds: 30 })).toEqual({
      ok: false,
      reason: 'stale_timestamp',
    });
  });

  it('a malformed timestamp', () => {
    for (const timestamp of ['abc', '12.5', '-1', '1e9', '']) {
      const result = verifyWebhookSignature({ ...inputOf(delivery, [secret]), timestamp });
      expect(result.ok).toBe(false);
    }
    expect(verifyWebhookSignature({ ...inputOf(delivery, [secret]), timestamp: 'abc' })).toEqual({ ok: false, reason: 'bad_timestamp' });
  });

  it('a missing header or no secret configured', () => {
    const input = inputOf(delivery, [secret]);
    expect(verifyWebhookSignature({ ...input, id: undefined })).toEqual({ ok: false, reason: 'missing_headers' });
    expect(verifyWebhookSignature({ ...input, timestamp: undefined })).toEqual({ ok: false, reason: 'missing_headers' });
    expect(verifyWebhookSignature({ ...input, signatureHeader: undefined })).toEqual({ ok: false, reason: 'missing_headers' });
    expect(verifyWebhookSignature({ ...input, signatureHeader: '' })).toEqual({ ok: false, reason: 'missing_headers' });
    expect(verifyWebhookSignature({ ...input, secrets: [] })).toEqual({ ok: false, reason: 'missing_headers' });
  });

  it('a truncated, re-versioned or garbled signature (without throwing on length)', () => {
    const input = inputOf(delivery, [secret]);
    const signature = input.signatureHeader ?? '';
    for (const bad of [
      signature.slice(0, -4),
      signature.slice(0, 10),
      'v1,',
      'v1',
      `v2,${signature.slice(3)}`,
      signature.replace('v1,', 'v1a,'),
      'v1,!!!!',
      `${signature}AAAA`,
    ]) {
      expect(verifyWebhookSignature({ ...input, signatureHeader: bad })).toEqual({ ok: false, reason: 'bad_signature' });
    }
  });

  it('accepts the right signature among several', () => {
    const input = inputOf(delivery, [secret]);
    const other = signWebhook({ id: input.id ?? '', timestamp: input.timestamp ?? '', body: 'x', secret: 'other' });
    expect(verifyWebhookSignature({ ...input, signatureHeader: `${other} ${input.signatureHeader}` })).toEqual({ ok: true });
    expect(verifyWebhookSignature({ ...input, signatureHeader: `v2,abc   ${input.signatureHeader}` })).toEqual({ ok: true });
  });
});

describe('interoperability with standardwebhooks (raw-key mode)', () => {
  it('standardwebhooks verifies what the simulator signs', () => {
    const wh = new Webhook(secret, { format: 'raw' });
    const headers = {
      'webhook-id': delivery.headers['webhook-id'] as string,
      'webhook-timestamp': delivery.headers['webhook-timestamp'] as string,
      'webhook-signature': delivery.headers['webhook-signature'] as string,
    };
    expect(wh.verify(delivery.body.toString('utf8'), headers)).toMatchObject({ type: 'composio.trigger.message' });
    expect(() => new Webhook('wrong-secret', { format: 'raw' }).verify(delivery.body.toString('utf8'), headers)).toThrow();
  });

  it('the verifier accepts what standardwebhooks signs', () => {
    const wh = new Webhook(secret, { format: 'raw' });
    const body = JSON.stringify({ id: 'msg_1', type: 'composio.trigger.message', data: { a: 1 } });
    const at = new Date();
    const signatureHeader = wh.sign('msg_interop', at, body);
    const timestamp = String(Math.floor(at.getTime() / 1000));
    expect(signatureHeader).toBe(signWebhook({ id: 'msg_interop', timestamp, body, secret }));
    expect(
      verifyWebhookSignature({ id: 'msg_interop', timestamp, signatureHeader, rawBody: body, secrets: [secret], nowSeconds: now() }),
    ).toEqual({ ok: true });
  });

  it('the key is the secret’s raw bytes: default (base64) mode disagrees', () => {
    const base64Secret = Buffer.from('a shared secret of some length').toString('base64');
    const body = '{}';
    const at = new Date();
    const decodedKeySignature = new Webhook(base64Secret).sign('msg_x', at, body);
    const timestamp = String(Math.floor(at.getTime() / 1000));
    expect(
      verifyWebhookSignature({
        id: 'msg_x',
        timestamp,
        signatureHeader: decodedKeySignature,
        rawBody: body,
        secrets: [base64Secret],
        nowSeconds: now(),
      }),
    ).toEqual({
      ok: false,
      reason: 'bad_signature',
    });
  });
});
