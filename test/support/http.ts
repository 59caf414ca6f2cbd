import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';

/**
 * Small helpers for tests that talk to a broker over real HTTP (a spawned process or an app
 * listening on loopback).
 */

export interface Registered {
  installationId: string;
  token: string;
  auth: { authorization: string };
}

/** `POST /v1/installations` over HTTP; fails the test unless it answers 201. */
export async function registerOver(url: string, body: Record<string, unknown> = {}): Promise<Registered> {
  const response = await fetch(`${url}/v1/installations`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (response.status !== 201) throw new Error(`registration failed: ${response.status} ${await response.text()}`);
  const { installationId, token } = (await response.json()) as { installationId: string; token: string };
  return { installationId, token, auth: { authorization: `Bearer ${token}` } };
}

/**
 * Every event id in the installation's queue over HTTP, from its acknowledged position, reading
 * 100 at a time and acknowledging each batch with the next poll's cursor; fails the test on any
 * answer but 200, and after 1,000 batches.
 */
export async function drainOver(url: string, who: Registered): Promise<string[]> {
  const received: string[] = [];
  let cursor: string | undefined;
  for (let round = 0; round < 1000; round += 1) {
    const query = new URLSearchParams({ limit: '100', wait: '0', ...(cursor ? { cursor } : {}) });
    const response = await fetch(`${url}/v1/events?${query}`, { headers: who.auth });
    if (response.status !== 200) throw new Error(`poll answered ${response.status}: ${await response.text()}`);
    const batch = (await response.json()) as { events: Array<{ id: string }>; cursor: string };
    if (batch.events.length === 0) return received;
    received.push(...batch.events.map((e) => e.id));
    cursor = batch.cursor;
  }
  throw new Error('queue did not drain');
}

export interface RawAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
  /** The parsed body, or undefined when it is not JSON. */
  json: any;
}

/**
 * One request on a fresh connection (no keep-alive pool), optionally from a chosen loopback
 * source address (`127.0.0.2`, …) so a test can be several clients. `signal` aborts it.
 */
export function rawRequest(
  url: string,
  options: {
    method?: string;
    headers?: Record<string, string>;
    body?: string;
    localAddress?: string;
    signal?: AbortSignal;
  } = {},
): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(
      url,
      {
        method: options.method ?? 'GET',
        headers: { connection: 'close', ...options.headers },
        agent: false,
        ...(options.localAddress ? { localAddress: options.localAddress } : {}),
        ...(options.signal ? { signal: options.signal } : {}),
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('error', reject);
        response.on('end', () => {
          const body = Buffer.concat(chunks).toString('utf8');
          let json: unknown;
          try {
            json = JSON.parse(body);
          } catch {
            json = undefined;
          }
          resolve({ status: response.statusCode ?? 0, headers: response.headers, body, json });
        });
      },
    );
    request.on('error', reject);
    request.end(options.body);
  });
}

/** A Prometheus sample's value from `/metrics` text (labels must match exactly), or undefined. */
export function metricValue(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  const wanted = Object.entries(labels)
    .map(([k, v]) => `${k}="${v}"`)
    .sort()
    .join(',');
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const match = /^([a-zA-Z_:][\w:]*)(?:\{([^}]*)\})?\s+(\S+)/.exec(line);
    if (!match || match[1] !== name) continue;
    const have = (match[2] ?? '').split(',').filter(Boolean).sort().join(',');
    if (have === wanted) return Number(match[3]);
  }
  return undefined;
}

/**
 * Waits until `condition` holds, or fails after `timeoutMs`. Checked again after 5 ms, then less
 * and less often, at least every UNTIL_EVERY_MS: many conditions are a request to a broker or to
 * Postgres, and asking one every 5 ms for seconds was a share of the processor the run needed.
 */
export async function until(condition: () => boolean | Promise<boolean>, timeoutMs = 10_000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let pauseMs = 5;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`${what} not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, pauseMs));
    pauseMs = Math.min(Math.ceil(pauseMs * 1.5), UNTIL_EVERY_MS);
  }
}

const UNTIL_EVERY_MS = 50;
