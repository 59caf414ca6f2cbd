import { createHash } from 'node:crypto';
import Fastify from 'fastify';
import postgres from 'postgres';

/**
 * The ideal poll server bench/idle.ts measures the broker's idle long poll against: plain Fastify
 * (logging off) that knows every installation's token from memory and has nothing queued.
 *
 * At start it reads SHA-256(token) → installation from the database (`DATABASE_URL`) once, and
 * never touches the database again. `GET /v1/events` answers `401` without a known bearer token;
 * otherwise `{"events":[],"cursor":…}` with a fixed 22-character cursor of the installation's,
 * at once for `wait=0` and after `wait` seconds (default 25, as the broker's) for more. The cursor
 * a client sends is ignored. `GET /health` answers `{status: 'ok'}`; `GET /metrics` says how many
 * polls are held, in the broker's gauge's name, so the bench watches both the same way.
 */

const databaseUrl = process.env.DATABASE_URL;
if (!databaseUrl) throw new Error('bench/idle-baseline.ts needs DATABASE_URL');

/** Each known token's hash → the poll's whole answer, written once. */
const answers = new Map<string, string>();
const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
for (const row of await sql<{ id: string; token_hash: string }[]>`select id, token_hash from installations`) {
  const cursor = createHash('sha256').update(`omb-ideal-cursor:${row.id}`).digest().subarray(0, 16).toString('base64url');
  answers.set(row.token_hash, `{"events":[],"cursor":"${cursor}"}`);
}
await sql.end({ timeout: 5 });

const TOKEN = /^Bearer ([0-9a-f]{64})$/;
const WAIT = /^[0-9]{1,3}$/;
const MAX_WAIT_SECONDS = 25;
const JSON_TYPE = 'application/json; charset=utf-8';
let held = 0;

const app = Fastify({ logger: false, connectionTimeout: 0, requestTimeout: 0, keepAliveTimeout: 72_000 });

app.get('/health', async () => ({ status: 'ok' }));

app.get('/metrics', async (_request, reply) => reply.type('text/plain').send(`omb_long_polls_waiting ${held}\n`));

// Not async, and answered through `reply.send`: a held poll is its timer and one closure.
app.get('/v1/events', (request, reply) => {
  const token = TOKEN.exec(request.headers.authorization ?? '')?.[1];
  const answer = token === undefined ? undefined : answers.get(createHash('sha256').update(token, 'utf8').digest('hex'));
  if (answer === undefined) return void reply.code(401).send({ error: 'missing or invalid token', code: 'unauthorized' });
  const wait = (request.query as { wait?: unknown }).wait ?? String(MAX_WAIT_SECONDS);
  if (typeof wait !== 'string' || !WAIT.test(wait) || Number(wait) > MAX_WAIT_SECONDS) {
    return void reply.code(400).send({ error: 'wait must be 0–25', code: 'bad_request' });
  }
  void reply.header('cache-control', 'no-store').type(JSON_TYPE);
  if (wait === '0' || Number(wait) === 0) return void reply.send(answer);
  held++;
  const timer = setTimeout(() => {
    held--;
    void reply.send(answer);
  }, Number(wait) * 1000);
  // A client that hangs up is not waited for.
  reply.raw.once('close', () => {
    if (reply.raw.writableEnded) return;
    clearTimeout(timer);
    held--;
  });
});

await app.listen({ host: process.env.HOST ?? '127.0.0.1', port: Number(process.env.PORT ?? 0) });
// Held polls are not waited for: the bench stops this server only once it is done with it.
process.on('SIGTERM', () => process.exit(0));
