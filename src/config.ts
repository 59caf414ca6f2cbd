import { isIP } from 'node:net';
import { z } from 'zod';
import { type DataKeys, parseDataKeys } from './data-keys/keys.js';
import { DEFAULT_DATABASE_TIMEOUT_MS } from './db/database.js';
import { RESTART_FOR_MS } from './db/embedded.js';

/**
 * The broker's whole configuration, read once from the environment. Nothing else in `src/`
 * reads `process.env`. A wrong value stops the process with a message naming the variable.
 */

/**
 * A whole number, in decimal digits (spaces around them allowed). Anything else is refused, never
 * read as `Number()` would read it: an empty value (`PORT=` in an env file) is not 0, and `0x50`
 * or `1e3` are not 80 or 1000. A number's value is no secret: a wrong one is quoted back.
 */
const wholeNumber = z
  .string()
  .trim()
  .regex(/^\d+$/, {
    error: (issue) =>
      issue.input === ''
        ? 'is empty; leave it unset for its default, or give a whole number'
        : `must be a whole number in decimal digits, not ${JSON.stringify(String(issue.input).slice(0, 40))}`,
  })
  // Capped, so that a value of many digits is refused for its range alone (every range here ends far below).
  .transform((digits) => Math.min(Number(digits), Number.MAX_SAFE_INTEGER));
const int = (min: number, max: number) => {
  const range = `must be from ${min.toLocaleString('en-US')} to ${max.toLocaleString('en-US')}`;
  return wholeNumber.pipe(z.number().int().min(min, range).max(max, range));
};
/**
 * Text that must say something: spaces around it are dropped (an address ` 127.0.0.1 ` pasted from
 * somewhere is `127.0.0.1`), and an empty value is refused rather than used.
 */
const text = z.string().trim().min(1, 'is empty; leave it unset for its default, or give a value');
const bool = z
  .enum(['true', 'false', '1', '0', 'yes', 'no', 'on', 'off'])
  .transform((v) => v === 'true' || v === '1' || v === 'yes' || v === 'on');
const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v.trim()));

const httpUrl = z
  .string()
  .trim()
  .refine((v) => URL.canParse(v) && /^https?:$/.test(new URL(v).protocol), 'must be an http(s) URL')
  .transform((v) => v.replace(/\/+$/, ''));

/**
 * The longest wait the API lets a poll ask for (`GET /v1/events?wait=0-25`, the contract's range).
 * `POLL_MAX_WAIT_SECONDS` may shorten it but not lengthen it, so a larger value is refused here
 * rather than silently capped by the route.
 */
export const POLL_WAIT_CAP_SECONDS = 25;

/*
 * Defaults that code outside the configuration also falls back on (a module used without the
 * broker's configuration, as the tests use it): written once, here for the features above it
 * and in db/ for the database's (`DEFAULT_DATABASE_TIMEOUT_MS`, `RESTART_FOR_MS`).
 */
/** `POLLS_PER_INSTALLATION` */
export const DEFAULT_POLLS_PER_INSTALLATION = 4;
/** `LISTENER_HEARTBEAT_MS` */
export const DEFAULT_LISTENER_HEARTBEAT_MS = 10_000;
/** `EVENT_REQUESTS_PER_MINUTE` */
export const DEFAULT_EVENT_REQUESTS_PER_MINUTE = 300;

/** proxy-addr's names for address ranges, which Fastify's `trustProxy` also takes. */
const NAMED_RANGES = new Set(['loopback', 'linklocal', 'uniquelocal']);

/** An address, a CIDR (`10.0.0.0/8`, `fd00::/8`) or one of proxy-addr's named ranges. */
function isProxyAddress(entry: string): boolean {
  if (NAMED_RANGES.has(entry)) return true;
  const [address, prefix, ...rest] = entry.split('/');
  const family = isIP(address ?? '');
  if (family === 0 || rest.length > 0) return false;
  if (prefix === undefined) return true;
  return /^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128);
}

/**
 * Which `x-forwarded-for` entries to believe, as Fastify's `trustProxy` takes it: `false` (none:
 * the socket's address), a hop count (the proxies in front, each appending the address it saw),
 * or the proxies' addresses/CIDRs. `true` — believe whatever the client wrote — is refused: a
 * client could name any address and so escape every per-address limit.
 */
const trustProxy = z
  .string()
  .default('false')
  .transform((raw, ctx): false | number | string[] => {
    const v = raw.trim().toLowerCase();
    if (['', 'false', '0', 'no', 'off'].includes(v)) return false;
    if (['true', 'yes', 'on'].includes(v)) {
      ctx.addIssue({
        code: 'custom',
        message:
          'true would believe any x-forwarded-for a client sends (so a client picks the address the limits see); give the number of proxies in front of the broker (e.g. 1) or their addresses/CIDRs (e.g. 10.0.0.0/8,127.0.0.1)',
      });
      return z.NEVER;
    }
    if (/^\d+$/.test(v)) {
      const hops = Number(v);
      if (hops > 10) ctx.addIssue({ code: 'custom', message: 'a hop count must be at most 10' });
      return hops;
    }
    const entries = v.split(',').map((entry) => entry.trim());
    const wrong = entries.filter((entry) => !isProxyAddress(entry));
    if (wrong.length > 0) {
      ctx.addIssue({
        code: 'custom',
        message: `must be false, a hop count, or comma-separated proxy addresses/CIDRs (${wrong.map((w) => JSON.stringify(w)).join(', ')} is not one)`,
      });
      return z.NEVER;
    }
    return entries;
  });

/**
 * Every variable the broker reads. Each `.describe()` is its line in docs/configuration.md, which
 * `npm run docs` writes from this schema (default and allowed values come from the schema too).
 */
export const EnvSchema = z.object({
  PORT: int(0, 65535).default(8787).describe('the port to listen on'),
  HOST: text.default('127.0.0.1').describe('the address to listen on'),
  PUBLIC_URL: optionalString
    .pipe(httpUrl.optional())
    .describe(
      'where Composio and clients reach this broker (the sandbox subscribes `PUBLIC_URL/v1/webhooks/composio`; `/openapi.yaml` and `/docs` name it as the server). Unset: `http://HOST:PORT`, and the reference names the address it was fetched from',
    ),
  DATABASE_URL: optionalString
    .pipe(
      z
        .string()
        .refine((v) => /^postgres(ql)?:\/\//.test(v), 'must be a postgres:// URL')
        .optional(),
    )
    .describe(
      'Postgres (`postgres://…`; with several hosts, add `target_session_attrs=primary` to follow a failover — `read-write` is refused, as it also picks a hot standby). Unset: an embedded Postgres under `DATA_DIR`',
    ),
  DATABASE_DIRECT_URL: optionalString
    .pipe(
      z
        .string()
        .refine((v) => /^postgres(ql)?:\/\//.test(v), 'must be a postgres:// URL')
        .optional(),
    )
    .describe(
      'a direct connection to Postgres, when `DATABASE_URL` is a transaction pooler (PgBouncer in `pool_mode = transaction`, a managed pooler endpoint): `LISTEN`, session advisory locks and the migrations go here, everything else through the pooler (see [Behind a pooler](operating.md#behind-a-pooler)). Unset: `DATABASE_URL` serves both',
    ),
  DATABASE_PASSWORD: z
    .string()
    .optional()
    .describe(
      'the database password, apart from `DATABASE_URL` and `DATABASE_DIRECT_URL` (which then name the user but no password); any character',
    ),
  DATA_DIR: text
    .default('./.data')
    .describe(
      "the embedded database's folder (`/data` in the image); must be writable by the broker's user; one broker at a time (see [One broker per data folder](operating.md#one-broker-per-data-folder)). The operator CLI uses the default only where it already holds a database (see [Which database the CLI uses](operators.md#which-database-the-cli-uses))",
    ),
  DATA_ENCRYPTION_KEYS: optionalString.describe(
    'the keys that encrypt events’ data and the webhook signing secrets in the database: `id:key`, comma-separated, each key 32 bytes in base64 or base64url (`openssl rand -base64 32`), each id 1 to 32 of `a-z0-9_-`. The first encrypts, all decrypt. Required with `NODE_ENV=production`; unset otherwise: a key file made in `DATA_DIR` at the first start (see [Encryption at rest](operating.md#encryption-at-rest))',
  ),
  EMBEDDED_POSTGRES_RESTART_MS: int(1_000, 3_600_000)
    .default(RESTART_FOR_MS)
    .describe(
      'how long the broker keeps trying to start again an embedded Postgres that died (first 250 ms after, then waits doubling up to 15 s apart; the last try at this) before it shuts down with exit 1 for its supervisor to restart it. Only without `DATABASE_URL`',
    ),
  DATABASE_POOL_SIZE: int(1, 200)
    .default(12)
    .describe('connections per broker process (two more are kept: one for `LISTEN`, one for `/health`)'),
  DATABASE_TIMEOUT_MS: int(100, 600_000)
    .default(DEFAULT_DATABASE_TIMEOUT_MS)
    .describe(
      'bound on every use of the database from being asked to being done: waiting for a free pool connection or for Postgres to come back, and the statement itself (`statement_timeout`; a transaction is bounded until it starts, then statement by statement). Also bounds connecting and waiting for any answer over plain TCP. Past it the request gets `503 database_unavailable` with `retry-after` instead of being held, and what it was waiting for never runs. `/health` probes on a connection of its own, bounded to 1 s (or this, if shorter)',
    ),

  COMPOSIO_API_KEY: optionalString.describe(
    'the shared Composio project key. Unset: sandbox mode (the built-in simulator); with `NODE_ENV=production` (the image) required unless `SANDBOX=true`',
  ),
  COMPOSIO_BASE_URL: httpUrl
    .default('https://backend.composio.dev')
    .describe("Composio's API origin; its host is trusted for MCP and link URLs beside `composio.dev`"),
  COMPOSIO_WEBHOOK_SECRET: optionalString.describe(
    'webhook signing secret(s), comma-separated; accepted besides the ones `webhook rotate-secret` stores in the database (each broker stores these at start, so a rotation expires them too). Required with `COMPOSIO_API_KEY` (the CLI needs none)',
  ),
  COMPOSIO_CALLS_PER_MINUTE: int(1, 1_000_000)
    .default(600)
    .describe(
      'the budget of calls to Composio for the whole project: every broker process on the database draws from the same one (set the same value on each)',
    ),
  COMPOSIO_TIMEOUT_MS: int(100, 120_000)
    .default(15_000)
    .describe("the deadline for all of one request's Composio calls together (waiting for budget included)"),
  MCP_TIMEOUT_MS: int(100, 3_600_000)
    .default(300_000)
    .describe(
      "how long `/v1/mcp` waits for the MCP server's status and headers (tool calls may take minutes), and for each next piece of a streamed answer; a stream that keeps sending is never cut. In place of `COMPOSIO_TIMEOUT_MS` for the MCP request itself",
    ),
  SANDBOX_HOST: text
    .default('127.0.0.1')
    .describe(
      'where the simulator listens in sandbox mode (`0.0.0.0` in a container whose `SANDBOX_PORT` is published; its links then name `127.0.0.1`)',
    ),
  SANDBOX: optionalString
    .pipe(bool.optional())
    .describe(
      '`true` runs sandbox mode where a key is otherwise required (`NODE_ENV=production`, as in the image); refused beside `COMPOSIO_API_KEY`',
    ),
  NODE_ENV: optionalString.describe('`production` (as the image sets it) requires `COMPOSIO_API_KEY` unless `SANDBOX=true`'),
  SANDBOX_PORT: int(0, 65535)
    .optional()
    .describe("the simulator's port in sandbox mode (`0`: a free one). Unset: `PORT + 1` (a free one when `PORT` is `0` or `65535`)"),

  OPERATOR_PUBLIC_KEYS: optionalString.describe(
    'JWKS (JSON) that grants and admin tokens must verify against; read at start, so a change needs a restart (roll the brokers). Unset: grants and admin API refused',
  ),
  OPERATOR_ISSUER: text.default('openmausbot').describe('the `iss` grants and admin tokens must carry'),
  REGISTRATION_MODE: z
    .enum(['open', 'closed'])
    .default('open')
    .describe('whether new installations may register, until an operator switches it at runtime'),

  REGISTRATIONS_PER_MINUTE: int(1, 1_000_000).default(30).describe('registrations per client address'),
  CONNECTOR_REQUESTS_PER_MINUTE: int(1, 1_000_000)
    .default(120)
    .describe('connected-app (and trigger) requests per installation, per route'),
  MCP_REQUESTS_PER_MINUTE: int(1, 1_000_000)
    .default(600)
    .describe(
      'MCP requests (`/v1/mcp`) per installation, apart from `CONNECTOR_REQUESTS_PER_MINUTE`; notifications, pings and answers to the server (JSON-RPC messages without a request `id`, `method: "ping"`) do not count',
    ),
  BAD_WEBHOOKS_PER_MINUTE: int(1, 1_000_000).default(600).describe('bad webhook signatures per source address before `429`'),
  CHECK_INS_PER_MINUTE: int(1, 1_000_000)
    .default(30)
    .describe('`GET /v1/me` per installation token (the app checks in at each start; `429` beyond, counted before the token is looked up)'),
  EVENT_REQUESTS_PER_MINUTE: int(1, 1_000_000)
    .default(DEFAULT_EVENT_REQUESTS_PER_MINUTE)
    .describe(
      "polls per installation per broker process, and apart from them acknowledgements (`429` beyond); counted in each process's memory, so across N processes an installation gets at most N times this",
    ),
  POLLS_PER_INSTALLATION: int(1, 1000)
    .default(DEFAULT_POLLS_PER_INSTALLATION)
    .describe('waiting polls one installation may hold per process; a further poll answers the oldest at once'),
  KNOWN_INSTALLATIONS_PER_PROCESS: int(1_000, 100_000_000)
    .default(1_000_000)
    .describe(
      'installations whose token and queue position each broker process keeps in memory, so that their polls and token checks cost no statement (0.4–0.8 KiB each, measured by `npm run bench:idle`); past it the one learnt the longest ago is forgotten and its next request is looked up again',
    ),
  LISTENER_HEARTBEAT_MS: int(1_000, 600_000)
    .default(DEFAULT_LISTENER_HEARTBEAT_MS)
    .describe(
      'how often each broker process checks its `LISTEN` connection by notifying itself through the pool: one dropped without a word (a NAT or balancer timing it out) is noticed and opened again within about twice this. A connection that closes is opened again at once, whatever this is',
    ),
  BODY_LIMIT_BYTES: int(1024, 64 * 1024 * 1024)
    .default(256 * 1024)
    .describe('largest JSON body (`413` above)'),
  MCP_BODY_LIMIT_BYTES: int(1024, 64 * 1024 * 1024)
    .default(2 * 1024 * 1024)
    .describe('largest MCP body (`413` above)'),

  QUOTA_STANDARD: int(0, 10_000_000).default(500).describe('kept events per installation per UTC day on the `standard` plan'),
  QUOTA_PAID: int(0, 10_000_000).default(2000).describe('kept events per installation per UTC day on the `paid` plan'),
  EVENT_RETENTION_DAYS: int(1, 365).default(7).describe('how long queued events are kept'),
  POLL_MAX_WAIT_SECONDS: wholeNumber
    .pipe(
      z.number().int().min(1).max(POLL_WAIT_CAP_SECONDS, `must be at most ${POLL_WAIT_CAP_SECONDS}, the longest wait a poll may ask for`),
    )
    .default(POLL_WAIT_CAP_SECONDS)
    .describe(
      `the longest a poll is held (a poll may ask for at most ${POLL_WAIT_CAP_SECONDS} s; a larger value stops the broker at start)`,
    ),
  AUDIT_RETENTION_DAYS: int(1, 36_500).default(400).describe("how long the operators' audit trail is kept"),
  TRIGGER_TESTS_PER_DAY: int(0, 10_000)
    .default(20)
    .describe('`trigger.test` events an installation may queue per UTC day (outside the quota)'),
  TRIGGER_RECONNECT_CHECK_SECONDS: int(1, 60)
    .default(15)
    .describe(
      'how often one broker process looks for triggers whose account was reconnected under its label (see [Triggers](api.md#triggers))',
    ),
  TRIGGER_RECONCILE_MINUTES: int(1, 10_080)
    .default(60)
    .describe(
      "how long one broker process waits, after start (15 s) and after each sweep, before reconciling every trigger with Composio's again: lost ones are made again, stopped ones shown and announced, unowned ones deleted after a day (see [Reconciliation](events.md#reconciliation-with-composio)); a sweep uses a tenth of `COMPOSIO_CALLS_PER_MINUTE`",
    ),

  METRICS_TOKEN: optionalString.describe('bearer token that opens `/metrics` on the public address. Unset: refused there'),
  METRICS_HOST: optionalString.describe(
    'with `METRICS_PORT`: a separate, private address serving `/metrics` without a token (set both or neither)',
  ),
  METRICS_PORT: int(0, 65535)
    .optional()
    .describe('with `METRICS_HOST`: the port of the private address serving `/metrics` without a token (set both or neither)'),
  SHUTDOWN_GRACE_MS: int(0, 600_000).default(10_000).describe('how long in-flight requests may take to finish at shutdown'),
  REQUEST_TIMEOUT_MS: int(1_000, 600_000)
    .default(30_000)
    .describe(
      "how long a request's headers and body may take to arrive (checked every second); a slower one gets `408 request_timeout` and its connection is closed. Answers themselves may take longer (long polls, MCP streams)",
    ),
  TRUST_PROXY: trustProxy.describe(
    "behind a load balancer: the number of proxies in front (`1` for one, at most `10`), or their addresses/CIDRs (`10.0.0.0/8,127.0.0.1`); the client address is then read from that many `x-forwarded-for` entries from the right. `true` is refused: it would believe whatever address a client writes. `false`: the socket's address",
  ),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info').describe('pino level'),
});

type Setting = keyof typeof EnvSchema.shape;

/** A setting's default, from the schema above: what route descriptions quote, so they cannot drift from it. */
function defaultOf<K extends Setting>(name: K): z.output<(typeof EnvSchema.shape)[K]> {
  return EnvSchema.shape[name].parse(undefined) as z.output<(typeof EnvSchema.shape)[K]>;
}

/** `` `NAME` (20 by default) ``, for a description; `shown` writes the default another way (`5 minutes`). */
export function settingText(name: Setting, shown: (value: number) => string = String): string {
  return `\`${name}\` (${shown(Number(defaultOf(name)))} by default)`;
}

/** The environment variables the broker reads, all as strings. */
export type Env = Partial<Record<keyof z.input<typeof EnvSchema>, string>>;

/**
 * The broker's configuration, as `loadConfig` answers it: its type is the mapping's below, so a
 * setting is written in `EnvSchema` (name, parsing, default, description) and once here (where it
 * lands), never a third time. Each setting's meaning is its `.describe()` above.
 */
export type Config = ReturnType<typeof configOf>;

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

const JwksSchema = z.object({ keys: z.array(z.record(z.string(), z.unknown())).min(1) });

/**
 * `for: 'cli'` leaves out the rules only a serving broker needs (the CLI's commands that need
 * Composio say so themselves), so `keys generate` or `migrate` run in the production image.
 */
export function loadConfig(env: Record<string, string | undefined> = process.env, options: { for?: 'broker' | 'cli' } = {}): Config {
  const parsed = EnvSchema.safeParse(env);
  if (!parsed.success) {
    throw new ConfigError(parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`));
  }
  const e = parsed.data;
  const problems: string[] = [];

  const webhookSecrets = (e.COMPOSIO_WEBHOOK_SECRET ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
  // A serving broker must verify webhooks; the CLI's webhook commands neither use nor store it
  // (a first subscription cannot have one yet).
  if (e.COMPOSIO_API_KEY && webhookSecrets.length === 0 && options.for !== 'cli') {
    problems.push('COMPOSIO_WEBHOOK_SECRET: required when COMPOSIO_API_KEY is set');
  }
  // Sandbox mode is for trying the broker out: in production (the image sets NODE_ENV) a missing
  // key is a mistake unless the operator asked for the simulator by name.
  if (e.COMPOSIO_API_KEY && e.SANDBOX === true) {
    problems.push('SANDBOX: true runs on the built-in simulator, but COMPOSIO_API_KEY is set; unset one of them');
  } else if (!e.COMPOSIO_API_KEY && e.NODE_ENV === 'production' && e.SANDBOX !== true && options.for !== 'cli') {
    problems.push(
      'COMPOSIO_API_KEY: required in production (NODE_ENV=production); set SANDBOX=true to try the broker on its built-in Composio simulator instead',
    );
  }

  let publicKeys: z.output<typeof JwksSchema> | undefined;
  if (e.OPERATOR_PUBLIC_KEYS) {
    try {
      const jwks = JwksSchema.safeParse(JSON.parse(e.OPERATOR_PUBLIC_KEYS));
      if (!jwks.success) problems.push('OPERATOR_PUBLIC_KEYS: must be a JWKS, {"keys": [ … ]}');
      else if (jwks.data.keys.some((k) => 'd' in k))
        problems.push('OPERATOR_PUBLIC_KEYS: holds a private key; configure only the public JWKS');
      else publicKeys = jwks.data;
    } catch {
      problems.push('OPERATOR_PUBLIC_KEYS: not valid JSON');
    }
  }
  if ((e.METRICS_HOST === undefined) !== (e.METRICS_PORT === undefined)) {
    problems.push('METRICS_HOST/METRICS_PORT: set both to serve /metrics on its own address, or neither');
  }
  // A password apart from the URL may hold any character (`@`, `/`, `#`, `%`): it is put into the
  // URL here, encoded, instead of by hand.
  const databaseUrl = withPassword('DATABASE_URL', e.DATABASE_URL, e.DATABASE_PASSWORD, problems);
  const databaseDirectUrl = withPassword('DATABASE_DIRECT_URL', e.DATABASE_DIRECT_URL, e.DATABASE_PASSWORD, problems);
  if (e.DATABASE_PASSWORD && databaseUrl === undefined) problems.push('DATABASE_PASSWORD: set DATABASE_URL too (without a password in it)');
  if (databaseDirectUrl !== undefined && databaseUrl === undefined) {
    problems.push('DATABASE_DIRECT_URL: set DATABASE_URL too (the pooler); without it the broker runs its embedded Postgres');
  }
  // postgres.js takes "read-write" to mean `default_transaction_read_only` is off, which a hot
  // standby also reports: with several hosts, pool connections would sit on the standby and every
  // write fail. `primary` asks `pg_is_in_recovery()` and follows a promotion.
  for (const [name, url] of [
    ['DATABASE_URL', databaseUrl],
    ['DATABASE_DIRECT_URL', databaseDirectUrl],
  ] as const) {
    if (url !== undefined && /[?&]target_session_attrs=read-write(&|$)/i.test(url)) {
      problems.push(
        `${name}: target_session_attrs=read-write would also pick a hot standby (it reports read-write); use target_session_attrs=primary`,
      );
    }
  }
  let dataKeys: DataKeys | undefined;
  if (e.DATA_ENCRYPTION_KEYS !== undefined) {
    const parsed = parseDataKeys(e.DATA_ENCRYPTION_KEYS, 'DATA_ENCRYPTION_KEYS');
    if ('problems' in parsed) problems.push(...parsed.problems.map((problem) => `DATA_ENCRYPTION_KEYS: ${problem}`));
    else dataKeys = parsed.keys;
  } else if (e.NODE_ENV === 'production' && options.for !== 'cli') {
    problems.push(
      'DATA_ENCRYPTION_KEYS: required in production (NODE_ENV=production): id:key, the key 32 bytes in base64 (`openssl rand -base64 32`); see docs/operating.md, "Encryption at rest"',
    );
  }
  if (problems.length > 0) throw new ConfigError(problems);

  return configOf(e, { databaseUrl, databaseDirectUrl, dataDirGiven: env.DATA_DIR !== undefined, webhookSecrets, publicKeys, dataKeys });
}

function configOf(
  e: z.output<typeof EnvSchema>,
  checked: {
    databaseUrl: string | undefined;
    databaseDirectUrl: string | undefined;
    dataDirGiven: boolean;
    webhookSecrets: string[];
    publicKeys: z.output<typeof JwksSchema> | undefined;
    dataKeys: DataKeys | undefined;
  },
) {
  return Object.freeze({
    port: e.PORT,
    host: e.HOST,
    publicUrl: e.PUBLIC_URL,
    databaseUrl: checked.databaseUrl,
    /** `DATABASE_DIRECT_URL`: Postgres itself, when `databaseUrl` is a transaction pooler. */
    databaseDirectUrl: checked.databaseDirectUrl,
    dataDir: e.DATA_DIR,
    /** Whether `DATA_DIR` was set: the operator CLI makes no database in the default folder. */
    dataDirGiven: checked.dataDirGiven,
    /** `DATA_ENCRYPTION_KEYS`; unset (outside production): the key file in `dataDir` (src/data-keys/keys.ts). */
    dataKeys: checked.dataKeys,
    embeddedRestartForMs: e.EMBEDDED_POSTGRES_RESTART_MS,
    databasePoolSize: e.DATABASE_POOL_SIZE,
    databaseTimeoutMs: e.DATABASE_TIMEOUT_MS,
    composio: Object.freeze({
      apiKey: e.COMPOSIO_API_KEY,
      baseUrl: e.COMPOSIO_BASE_URL,
      /** Secrets accepted on incoming webhooks; several during a rotation. */
      webhookSecrets: Object.freeze(checked.webhookSecrets),
      callsPerMinute: e.COMPOSIO_CALLS_PER_MINUTE,
      timeoutMs: e.COMPOSIO_TIMEOUT_MS,
      mcpTimeoutMs: e.MCP_TIMEOUT_MS,
      /** Stable (PORT + 1) so consent links outlive a restart; 0 picks a free one. */
      sandboxPort: e.SANDBOX_PORT ?? (e.PORT === 0 || e.PORT === 65535 ? 0 : e.PORT + 1),
      sandboxHost: e.SANDBOX_HOST,
    }),
    /** `publicKeys`: the JWKS grants and admin tokens must verify against; unset refuses both. */
    operators: Object.freeze({ publicKeys: checked.publicKeys, issuer: e.OPERATOR_ISSUER }),
    registrationMode: e.REGISTRATION_MODE,
    limits: Object.freeze({
      registrationsPerMinute: e.REGISTRATIONS_PER_MINUTE,
      connectorRequestsPerMinute: e.CONNECTOR_REQUESTS_PER_MINUTE,
      mcpRequestsPerMinute: e.MCP_REQUESTS_PER_MINUTE,
      badWebhooksPerMinute: e.BAD_WEBHOOKS_PER_MINUTE,
      eventRequestsPerMinute: e.EVENT_REQUESTS_PER_MINUTE,
      checkInsPerMinute: e.CHECK_INS_PER_MINUTE,
      bodyLimitBytes: e.BODY_LIMIT_BYTES,
      mcpBodyLimitBytes: e.MCP_BODY_LIMIT_BYTES,
    }),
    quotas: Object.freeze({ standard: e.QUOTA_STANDARD, paid: e.QUOTA_PAID }),
    events: Object.freeze({
      retentionDays: e.EVENT_RETENTION_DAYS,
      pollMaxWaitSeconds: e.POLL_MAX_WAIT_SECONDS,
      testsPerDay: e.TRIGGER_TESTS_PER_DAY,
      pollsPerInstallation: e.POLLS_PER_INSTALLATION,
      listenerHeartbeatMs: e.LISTENER_HEARTBEAT_MS,
      knownInstallations: e.KNOWN_INSTALLATIONS_PER_PROCESS,
    }),
    auditRetentionDays: e.AUDIT_RETENTION_DAYS,
    triggers: Object.freeze({
      reconnectCheckSeconds: e.TRIGGER_RECONNECT_CHECK_SECONDS,
      reconcileMinutes: e.TRIGGER_RECONCILE_MINUTES,
    }),
    metrics: Object.freeze({ token: e.METRICS_TOKEN, host: e.METRICS_HOST, port: e.METRICS_PORT }),
    shutdownGraceMs: e.SHUTDOWN_GRACE_MS,
    requestTimeoutMs: e.REQUEST_TIMEOUT_MS,
    /** `false` none, a hop count, or the proxies' addresses/CIDRs (never `true`, which would believe the client itself). */
    trustProxy: Array.isArray(e.TRUST_PROXY) ? Object.freeze([...e.TRUST_PROXY]) : e.TRUST_PROXY,
    logLevel: e.LOG_LEVEL,
  });
}

/**
 * `url` with `password` put in, encoded, when one is given apart (`DATABASE_PASSWORD`); a URL that
 * already holds one, or names no user, is a problem named after `name`.
 */
function withPassword(name: string, url: string | undefined, password: string | undefined, problems: string[]): string | undefined {
  if (url === undefined || password === undefined || password === '') return url;
  const parsed = new URL(url);
  if (parsed.password !== '') problems.push(`DATABASE_PASSWORD: ${name} already holds a password; give it in one place`);
  else if (parsed.username === '') problems.push(`DATABASE_PASSWORD: ${name} names no user (postgres://user@host/db)`);
  else {
    parsed.password = encodeURIComponent(password);
    return parsed.toString();
  }
  return url;
}
