import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { register } from '../../support/app.js';
import { buildEventsApp, countEvents, type EventsTestApp, insertTrigger, poll, post, signed, triggerMessage } from '../helpers.js';

/**
 * Every genuine delivery can be stored: what `jsonb` cannot hold (NUL, an unpaired UTF-16
 * surrogate from a subject cut mid-emoji) is replaced and the event kept; JSON nested deeper
 * than the stated depth (64) is refused with `400` before anything walks it recursively.
 */

let t: EventsTestApp;
beforeAll(async () => {
  t = await buildEventsApp({ BAD_WEBHOOKS_PER_MINUTE: '1000' });
});
afterAll(() => t.close());

/** `depth` levels of arrays around a value. */
const nested = (depth: number) => `${'['.repeat(depth)}1${']'.repeat(depth)}`;

describe('webhook payloads', () => {
  it('keeps a payload with unpaired surrogates (a subject cut mid-emoji), handed back as sent', async () => {
    const owner = await register(t.app);
    const trigger = await insertTrigger(t.database, owner.installationId);
    // As Composio's JSON carries them: escaped, high without low, low without high, in a key too.
    const body = JSON.stringify(triggerMessage(trigger, { subject: 'PLACEHOLDER', PLACEKEY: 1, pair: '😀' }))
      .replace('PLACEHOLDER', 'Hi \\ud83d and \\ude00 and \\u0000')
      .replace('PLACEKEY', 'k\\udc00');
    const response = await post(t, signed(body, { at: t.clock.now() }));
    expect(response.json()).toEqual({ outcome: 'accepted' });
    const { events } = await poll(t, owner.auth);
    // Its data is stored encrypted as the delivery's text (src/events/sealing.ts), escapes and all.
    // (Stored in clear, beside a broker of the previous release, each becomes U+FFFD, as jsonb takes it.)
    expect(events[0]!.data).toEqual({ subject: 'Hi \ud83d and \ude00 and \u0000', 'k\udc00': 1, pair: '😀' });
  });

  it('refuses JSON nested deeper than 64 levels with 400 json_too_deep, storing nothing', async () => {
    const owner = await register(t.app);
    const trigger = await insertTrigger(t.database, owner.installationId);
    for (const depth of [100, 5_000]) {
      const body = JSON.stringify(triggerMessage(trigger, { deep: 'PLACEHOLDER' })).replace('"PLACEHOLDER"', nested(depth));
      const response = await post(t, signed(body, { at: t.clock.now() }));
      expect(response.statusCode).toBe(400);
      expect(response.json()).toEqual({ error: expect.stringMatching(/^body\.data: .*64/), code: 'json_too_deep' });
    }
    expect(await countEvents(t.database, owner.installationId)).toBe(0);
  });

  it('accepts nesting up to the stated depth', async () => {
    const owner = await register(t.app);
    const trigger = await insertTrigger(t.database, owner.installationId);
    // The envelope and `data` are two levels; `deep` adds 62 more: 64 in all.
    const body = JSON.stringify(triggerMessage(trigger, { deep: 'PLACEHOLDER' })).replace('"PLACEHOLDER"', nested(62));
    const response = await post(t, signed(body, { at: t.clock.now() }));
    expect(response.json()).toEqual({ outcome: 'accepted' });
  });
});

describe('JSON bodies of the API', () => {
  it('refuses nesting deeper than 64 levels with 400 naming the field, before parsing it', async () => {
    const { auth } = await register(t.app);
    for (const depth of [100, 20_000]) {
      const response = await t.app.inject({
        method: 'POST',
        url: '/v1/triggers',
        headers: { ...auth, 'content-type': 'application/json' },
        payload: `{"automationId":"a","toolkit":"gmail","triggerSlug":"GMAIL_NEW_GMAIL_MESSAGE","connectedAccountId":"ca_x","config":{"x":${nested(depth)}}}`,
      });
      expect(response.statusCode).toBe(400);
      expect(response.json()).toEqual({ error: expect.stringMatching(/^body\.config: /), code: 'json_too_deep' });
    }
  });
});
