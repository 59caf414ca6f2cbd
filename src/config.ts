import { z } from 'zod';

/**
 * The broker's whole configuration, read once from the environment. Nothing else in `src/`
 * reads `process.env`. A wrong value stops the process with a message naming the variable.
 */

const int = (min: number, max: number) => z.coerce.number().int().min(min).max(max);
const bool = z
  .enum(['true', 'false', '1', '0', 'yes', 'no', 'on', 'off'])
  .transform((v) => v === 'true' || v === '1' || v === 'yes' || v === 'on');
const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v.trim()));

const httpUrl = z
  .string()
  .refine((v) => URL.canParse(v) && /^https?:$/.test(new URL(v).protocol), 'must be an http(s) URL')
  .transform((v) => v.replace(/\/+$/, ''));

const EnvSchema = z.object({
  PORT: int(0, 65535).default(8787),
  HOST: z.string().min(1).default('127.0.0.1'),
  PUBLIC_URL: optionalString.pipe(httpUrl.optional()),
  DATABASE_URL: optionalString.pipe(
    z
      .string()
      .refine((v) => /^postgres(ql)?:\/\//.test(v), 'must be a postgres:// URL')
      .optional(),
  ),
  DATA_DIR: z.string().min(1).default('./.data'),
  DATABASE_POOL_SIZE: int(1, 200).default(12),

  COMPOSIO_API_KEY: optionalString,
  COMPOSIO_BASE_URL: httpUrl.default('https://backend.composio.dev'),
  COMPOSIO_WEBHOOK_SECRET: optionalString,
  COMPOSIO_CALLS_PER_MINUTE: int(1, 1_000_000).default(600),
  COMPOSIO_TIMEOUT_MS: int(100, 120_000).default(15_000),
  SANDBOX_PORT: int(0, 65535).default(0),

  OPERATOR_PUBLIC_KEYS: optionalString,
  OPERATOR_ISSUER: z.string().min(1).default('openmausbot'),
  REGISTRATION_MODE: z.enum(['open', 'closed']).default('open'),

  REGISTRATIONS_PER_MINUTE: int(1, 1_000_000).default(30),
  CONNECTOR_REQUESTS_PER_MINUTE: int(1, 1_000_000).default(120),
  BAD_WEBHOOKS_PER_MINUTE: int(1, 1_000_000).default(600),
  EVENT_REQUESTS_PER_MINUTE: int(1, 1_000_000).default(300),
  POLLS_PER_INSTALLATION: int(1, 1000).default(4),
  BODY_LIMIT_BYTES: int(1024, 64 * 1024 * 1024).default(256 * 1024),
  MCP_BODY_LIMIT_BYTES: int(1024, 64 * 1024 * 1024).default(2 * 1024 * 1024),

  QUOTA_STANDARD: int(0, 10_000_000).default(500),
  QUOTA_PAID: int(0, 10_000_000).default(2000),
  EVENT_RETENTION_DAYS: int(1, 365).default(7),
  POLL_MAX_WAIT_SECONDS: int(1, 300).default(25),

  METRICS_TOKEN: optionalString,
  METRICS_HOST: optionalString,
  METRICS_PORT: int(0, 65535).optional(),
  SHUTDOWN_GRACE_MS: int(0, 600_000).default(10_000),
  TRUST_PROXY: bool.default(false),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
});

/** The environment variables the broker reads, all as strings. */
export type Env = Partial<Record<keyof z.input<typeof EnvSchema>, string>>;

export interface Config {
  readonly port: number;
  readonly host: string;
  /** Where Composio can reach this broker (for the webhook URL in sandbox mode). */
  readonly publicUrl: string | undefined;
  readonly databaseUrl: string | undefined;
  readonly dataDir: string;
  readonly databasePoolSize: number;
  readonly composio: {
    /** Unset: sandbox mode, the built-in simulator. */
    readonly apiKey: string | undefined;
    readonly baseUrl: string;
    /** Secrets accepted on incoming webhooks; several during a rotation. */
    readonly webhookSecrets: readonly string[];
    readonly callsPerMinute: number;
    readonly timeoutMs: number;
    readonly sandboxPort: number;
  };
  readonly operators: {
    /** The JWKS grants and admin tokens must verify against; unset refuses both. */
    readonly publicKeys: { keys: Record<string, unknown>[] } | undefined;
    readonly issuer: string;
  };
  readonly registrationMode: 'open' | 'closed';
  readonly limits: {
    readonly registrationsPerMinute: number;
    readonly connectorRequestsPerMinute: number;
    readonly badWebhooksPerMinute: number;
    /** Polls and acknowledgements per installation per minute (`/v1/events`, `/v1/events/ack`, each counted). */
    readonly eventRequestsPerMinute: number;
    readonly bodyLimitBytes: number;
    readonly mcpBodyLimitBytes: number;
  };
  readonly quotas: { readonly standard: number; readonly paid: number };
  readonly events: {
    readonly retentionDays: number;
    readonly pollMaxWaitSeconds: number;
    /** Waiting polls per installation; a poll beyond them answers the oldest waiting one at once, empty. */
    readonly pollsPerInstallation: number;
  };
  readonly metrics: {
    readonly token: string | undefined;
    readonly host: string | undefined;
    readonly port: number | undefined;
  };
  readonly shutdownGraceMs: number;
  readonly trustProxy: boolean;
  readonly logLevel: string;
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

const JwksSchema = z.object({ keys: z.array(z.record(z.string(), z.unknown())).min(1) });

export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
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
  if (e.COMPOSIO_API_KEY && webhookSecrets.length === 0) {
    problems.push('COMPOSIO_WEBHOOK_SECRET: required when COMPOSIO_API_KEY is set');
  }

  let publicKeys: Config['operators']['publicKeys'];
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
  if (problems.length > 0) throw new ConfigError(problems);

  return Object.freeze({
    port: e.PORT,
    host: e.HOST,
    publicUrl: e.PUBLIC_URL,
    databaseUrl: e.DATABASE_URL,
    dataDir: e.DATA_DIR,
    databasePoolSize: e.DATABASE_POOL_SIZE,
    composio: Object.freeze({
      apiKey: e.COMPOSIO_API_KEY,
      baseUrl: e.COMPOSIO_BASE_URL,
      webhookSecrets: Object.freeze(webhookSecrets),
      callsPerMinute: e.COMPOSIO_CALLS_PER_MINUTE,
      timeoutMs: e.COMPOSIO_TIMEOUT_MS,
      sandboxPort: e.SANDBOX_PORT,
    }),
    operators: Object.freeze({ publicKeys, issuer: e.OPERATOR_ISSUER }),
    registrationMode: e.REGISTRATION_MODE,
    limits: Object.freeze({
      registrationsPerMinute: e.REGISTRATIONS_PER_MINUTE,
      connectorRequestsPerMinute: e.CONNECTOR_REQUESTS_PER_MINUTE,
      badWebhooksPerMinute: e.BAD_WEBHOOKS_PER_MINUTE,
      eventRequestsPerMinute: e.EVENT_REQUESTS_PER_MINUTE,
      bodyLimitBytes: e.BODY_LIMIT_BYTES,
      mcpBodyLimitBytes: e.MCP_BODY_LIMIT_BYTES,
    }),
    quotas: Object.freeze({ standard: e.QUOTA_STANDARD, paid: e.QUOTA_PAID }),
    events: Object.freeze({
      retentionDays: e.EVENT_RETENTION_DAYS,
      pollMaxWaitSeconds: e.POLL_MAX_WAIT_SECONDS,
      pollsPerInstallation: e.POLLS_PER_INSTALLATION,
    }),
    metrics: Object.freeze({ token: e.METRICS_TOKEN, host: e.METRICS_HOST, port: e.METRICS_PORT }),
    shutdownGraceMs: e.SHUTDOWN_GRACE_MS,
    trustProxy: e.TRUST_PROXY,
    logLevel: e.LOG_LEVEL,
  });
}
