import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { register } from '../support/app.js';
import {
  buildEventsApp,
  countEvents,
  type EventsTestApp,
  getEvents,
  insertTrigger,
  post,
  SECRET,
  type SignedWebhook,
  signed,
  triggerMessage,
} from './helpers.js';

/**
 * The event the app receives is the data Composio sent: keys JavaScript treats specially
 * (`__proto__`, `constructor`) and numbers beyond a double (`1e400`, 30-digit ids, `1.50`) reach
 * `GET /v1/events` as they were signed. What cannot be kept so is refused with a reason, and
 * counted: bytes that are not UTF-8, and numbers beyond what Postgres stores.
 */

let t: EventsTestApp;
beforeAll(async () => {
  t = await buildEventsApp({ BAD_WEBHOOKS_PER_MINUTE: '1000' });
});
afterAll(() => t.close());

/** A trigger message whose `data` is the JSON text `dataText`, written by hand. */
function messageWithData(trigger: Parameters<typeof triggerMessage>[0], dataText: string): string {
  return JSON.stringify(triggerMessage(trigger, { PLACEHOLDER: true })).replace('{"PLACEHOLDER":true}', dataText);
}

/** `signed`, for a body of raw bytes (which need not be UTF-8). */
function signedBytes(body: Buffer, at: Date): SignedWebhook & { bytes: Buffer } {
  const id = `msg_bytes_${at.getTime()}_${Math.random().toString(16).slice(2)}`;
  const timestamp = Math.floor(at.getTime() / 1000);
  const mac = createHmac('sha256', Buffer.from(SECRET, 'utf8')).update(`${id}.${timestamp}.`).update(body).digest('base64');
  return {
    id,
    body: '',
    bytes: body,
    headers: {
      'content-type': 'application/json',
      'webhook-id': id,
      'webhook-timestamp': String(timestamp),
      'webhook-signature': `v1,${mac}`,
    },
  };
}

const postBytes = (webhook: SignedWebhook & { bytes: Buffer }) =>
  t.app.inject({ method: 'POST', url: '/v1/webhooks/composio', headers: webhook.headers, payload: webhook.bytes });

describe('the data an app receives', () => {
  it('is the data Composio sent: __proto__ and constructor keys, 1e400, long and trailing-zero numbers', async () => {
    const owner = await register(t.app);
    const trigger = await insertTrigger(t.database, owner.installationId);
    const data =
      '{"__proto__":{"x":1},"constructor":1,"big":1e400,"tiny":-1e-400,"id":123456789012345678901234567890,' +
      '"price":1.50,"path":"C:\\\\u0000","nested":{"__proto__":[1e400]}}';
    const response = await post(t, signed(messageWithData(trigger, data), { at: t.clock.now() }));
    expect(response.json()).toEqual({ outcome: 'accepted' });

    const answer = await getEvents(t, owner.auth);
    expect(answer.statusCode).toBe(200);
    // The delivery's own text, byte for byte: numbers, key order and spacing as written.
    expect(answer.body).toContain(`"data":${data}}`);
    const [event] = answer.json<{ events: { data: Record<string, unknown> }[] }>().events;
    // JSON.parse keeps `__proto__` as an own key, as the app's parser would.
    expect(Object.getOwnPropertyDescriptor(event!.data, '__proto__')?.value).toEqual({ x: 1 });
    expect(Object.getOwnPropertyDescriptor(event!.data, 'constructor')?.value).toBe(1);
    // An escaped backslash before `u0000` is text, not NUL: nothing is replaced.
    expect(event!.data.path).toBe('C:\\u0000');
  });

  it('keeps data exact when it arrives among others and is written in one batch with them', async () => {
    const owner = await register(t.app);
    const trigger = await insertTrigger(t.database, owner.installationId);
    const deliveries = Array.from({ length: 8 }, (_, i) =>
      signed(messageWithData(trigger, `{"n":${i},"big":1e400}`), { at: t.clock.now() }),
    );
    const answers = await Promise.all(deliveries.map((d) => post(t, d)));
    expect(answers.map((a) => a.json())).toEqual(deliveries.map(() => ({ outcome: 'accepted' })));
    const body = (await getEvents(t, owner.auth, { limit: 100 })).body;
    for (let i = 0; i < 8; i++) expect(body).toContain(`"data":{"n":${i},"big":1e400}}`);
  });
});

describe('what cannot be kept as sent', () => {
  it('refuses a delivery that is not UTF-8 with 400 invalid_utf8, counted as invalid, storing nothing', async () => {
    const owner = await register(t.app);
    const trigger = await insertTrigger(t.database, owner.installationId);
    const [head, tail] = messageWithData(trigger, '{"alias":"PLACE"}').split('PLACE');
    const body = Buffer.concat([Buffer.from(head!), Buffer.from([0xff, 0xfe, 0xfd]), Buffer.from(tail!)]);
    const before = t.events.outcomes.totals();
    const response = await postBytes(signedBytes(body, t.clock.now()));
    expect(response.statusCode).toBe(400);
    expect(response.json()).toEqual({ error: 'body is not valid UTF-8', code: 'invalid_utf8' });
    expect(t.events.outcomes.totals().invalid).toBe(before.invalid + 1);
    expect(await countEvents(t.database, owner.installationId)).toBe(0);
  });

  it('refuses data whose numbers Postgres cannot store, or hand back, with 422, counted, storing nothing', async () => {
    const owner = await register(t.app);
    const trigger = await insertTrigger(t.database, owner.installationId);
    const before = t.events.outcomes.totals();
    // Beyond Postgres's numeric, with an exponent and without (16384 digits after the point,
    // 131073 before it); and nine numbers Postgres can hold, which written out for the app would
    // be more than a megabyte of digits (1e131071 is 131072 of them).
    const beyond = ['1e131072', '1e-16384', `0.${'0'.repeat(16383)}1`, `1${'0'.repeat(131072)}`];
    for (const number of [...beyond, `[${Array(9).fill('1e131071').join(',')}]`]) {
      const response = await post(t, signed(messageWithData(trigger, `{"n":${number}}`), { at: t.clock.now() }));
      expect(response.statusCode).toBe(422);
      expect(response.json()).toEqual({
        error: expect.stringMatching(/^data holds numbers that cannot be stored as sent/),
        code: 'data_not_storable',
      });
    }
    expect(t.events.outcomes.totals().unstorable).toBe(before.unstorable + 5);
    expect(t.logs.text).toContain('webhook refused: its data cannot be stored as sent');
    expect(await countEvents(t.database, owner.installationId)).toBe(0);
  });

  it('refuses only that delivery when it arrives among others', async () => {
    const owner = await register(t.app);
    const trigger = await insertTrigger(t.database, owner.installationId);
    const deliveries = Array.from({ length: 6 }, (_, i) =>
      signed(messageWithData(trigger, i === 3 ? '{"n":1e131072}' : `{"n":${i}}`), { at: t.clock.now() }),
    );
    const answers = await Promise.all(deliveries.map((d) => post(t, d)));
    expect(answers.map((a) => a.statusCode)).toEqual([200, 200, 200, 422, 200, 200]);
    expect(await countEvents(t.database, owner.installationId)).toBe(5);
  });
});
