import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { ConfigError, loadConfig } from '../../src/config.js';
import { CLOSE_MARGIN_MS } from '../../src/shutdown.js';
import { TEST_DATA_KEYS } from '../support/data-keys.js';
import { SHIPPED_NGINX_CONF } from '../support/nginx.js';

/**
 * No Docker engine here, so the container setup is checked as text: docker/compose.yml (and its
 * sandbox override) parsed as YAML and interpolated as Compose does, each broker's environment
 * fed to the broker's own configuration with the Dockerfile's ENV, the Dockerfile's user and
 * volume, the ignore files, and docker/nginx.conf as text. `nginx -t` on it needs Debian's nginx:
 * nginx.system.test.ts.
 */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const read = (file: string) => readFile(path.join(ROOT, file), 'utf8');

type Service = {
  environment?: Record<string, string>;
  deploy?: { replicas?: number };
  ports?: string[];
  stop_grace_period?: string;
  healthcheck?: { test: string[] | string };
  depends_on?: Record<string, { condition: string }> | string[];
};
type Compose = { services: Record<string, Service> };

/** Compose's `${VAR}`, `${VAR:-default}` and `${VAR:?message}` over `vars`. */
function interpolate(text: string, vars: Record<string, string>): string {
  return text.replace(/\$\{(\w+)(?:(:-|:\?)([^}]*))?\}/g, (_all, name: string, op?: string, arg?: string) => {
    const value = vars[name];
    if (value !== undefined && value !== '') return value;
    if (op === ':?') throw new Error(`compose refuses: ${name}: ${arg}`);
    return op === ':-' ? (arg ?? '') : '';
  });
}

/** Compose interpolates the parsed file's strings, so `KEY: ${X:-}` is the empty string. */
function interpolateValues(value: unknown, vars: Record<string, string>): unknown {
  if (typeof value === 'string') return interpolate(value, vars);
  if (Array.isArray(value)) return value.map((v) => interpolateValues(v, vars));
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, interpolateValues(v, vars)]));
  return value;
}

async function compose(files: string[], vars: Record<string, string>): Promise<Compose> {
  const [base, ...overrides] = await Promise.all(files.map(async (f) => interpolateValues(parse(await read(f)), vars) as Compose));
  // Compose merges an override's maps key by key and replaces its lists and scalars.
  for (const override of overrides) {
    for (const [name, service] of Object.entries(override.services)) {
      base!.services[name] ??= {};
      const into = base!.services[name] as Record<string, unknown>;
      for (const [key, value] of Object.entries(service)) {
        const current = into[key];
        into[key] =
          value && typeof value === 'object' && !Array.isArray(value) && current && typeof current === 'object' && !Array.isArray(current)
            ? { ...(current as object), ...(value as object) }
            : value;
      }
    }
  }
  return base!;
}

/** The Dockerfile's runtime `ENV` (the last stage's). */
async function imageEnv(): Promise<Record<string, string>> {
  const dockerfile = await read('Dockerfile');
  const runtime = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '));
  const env: Record<string, string> = {};
  for (const line of runtime.split('\n').filter((l) => l.startsWith('ENV '))) {
    for (const [, key, value] of line.slice(4).matchAll(/(\w+)=(\S+)/g)) env[key!] = value!;
  }
  return env;
}

/** `30s`, `1m30s`, `2m` in milliseconds. */
function duration(text: string): number {
  const match = /^(?:(\d+)m)?(?:(\d+)s)?$/.exec(text.trim());
  if (!match || (!match[1] && !match[2])) throw new Error(`not a duration: ${text}`);
  return (Number(match[1] ?? 0) * 60 + Number(match[2] ?? 0)) * 1000;
}

const PRODUCTION = {
  POSTGRES_PASSWORD: 'pw',
  COMPOSIO_API_KEY: 'ak_live',
  COMPOSIO_WEBHOOK_SECRET: 'whsec',
  DATA_ENCRYPTION_KEYS: TEST_DATA_KEYS,
};

describe('docker/compose.yml', () => {
  it('starts production brokers that the broker’s own configuration accepts', async () => {
    const file = await compose(['docker/compose.yml'], PRODUCTION);
    const broker = file.services.broker!;
    const config = loadConfig({ ...(await imageEnv()), ...broker.environment });
    expect(config.composio.apiKey).toBe('ak_live');
    expect(config.trustProxy).toBe(1);
    expect(broker.deploy?.replicas).toBeGreaterThan(1);
  });

  it('requires the data keys: compose refuses to start the brokers without DATA_ENCRYPTION_KEYS', async () => {
    await expect(compose(['docker/compose.yml'], { ...PRODUCTION, DATA_ENCRYPTION_KEYS: '' })).rejects.toThrow(
      /compose refuses: DATA_ENCRYPTION_KEYS: set DATA_ENCRYPTION_KEYS/,
    );
  });

  it('requires the Composio key in production: the broker refuses to start without it', async () => {
    const file = await compose(['docker/compose.yml'], { POSTGRES_PASSWORD: 'pw', DATA_ENCRYPTION_KEYS: TEST_DATA_KEYS });
    const env = { ...(await imageEnv()), ...file.services.broker!.environment };
    expect(env.NODE_ENV).toBe('production');
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(/COMPOSIO_API_KEY: required in production/);
  });

  it('starts in sandbox mode without a key, with the simulator published to the host', async () => {
    const file = await compose(['docker/compose.yml', 'docker/compose.sandbox.yml'], {
      POSTGRES_PASSWORD: 'pw',
      DATA_ENCRYPTION_KEYS: TEST_DATA_KEYS,
    });
    const broker = file.services.broker!;
    const config = loadConfig({ ...(await imageEnv()), ...broker.environment });
    expect(config.composio.apiKey).toBeUndefined();
    // Listening on every address inside the container, on the port published on the host.
    expect(config.composio.sandboxHost).toBe('0.0.0.0');
    expect(config.composio.sandboxPort).toBeGreaterThan(0);
    expect(broker.ports).toContainEqual(
      expect.stringMatching(new RegExp(`:${config.composio.sandboxPort}:${config.composio.sandboxPort}$`)),
    );
    // The simulator lives in one broker's memory: one replica, so every request reaches it.
    expect(broker.deploy?.replicas).toBe(1);
  });

  it('passes the database password apart from the URL', async () => {
    const password = 'p@ss:/w#rd%?';
    const file = await compose(['docker/compose.yml'], { ...PRODUCTION, POSTGRES_PASSWORD: password });
    const env = file.services.broker!.environment!;
    expect(new URL(env.DATABASE_URL!).password).toBe('');
    expect(env.DATABASE_PASSWORD).toBe(password);
    const url = new URL(loadConfig({ ...(await imageEnv()), ...env }).databaseUrl!);
    expect(decodeURIComponent(url.password)).toBe(password);
    expect(file.services.postgres!.environment!.POSTGRES_PASSWORD).toBe(password);
  });

  it('gives the broker longer to stop than its shutdown deadline', async () => {
    const file = await compose(['docker/compose.yml'], PRODUCTION);
    const broker = file.services.broker!;
    const config = loadConfig({ ...(await imageEnv()), ...broker.environment });
    // SHUTDOWN_GRACE_MS for requests, then CLOSE_MARGIN_MS to close the database.
    const deadline = config.shutdownGraceMs + CLOSE_MARGIN_MS;
    expect(broker.stop_grace_period).toBeDefined();
    expect(duration(broker.stop_grace_period!)).toBeGreaterThan(deadline);
  });

  it('lets nginx wait for healthy brokers and each replica’s metrics be scraped on its own', async () => {
    const file = await compose(['docker/compose.yml'], PRODUCTION);
    const { broker, balancer } = file.services;
    expect(broker!.healthcheck?.test).toContain('node');
    expect(JSON.stringify(broker!.healthcheck?.test)).toContain('/health');
    expect((balancer!.depends_on as Record<string, { condition: string }>).broker).toEqual({ condition: 'service_healthy' });

    const config = loadConfig({ ...(await imageEnv()), ...broker!.environment });
    expect(config.metrics.host).toBe('0.0.0.0');
    expect(config.metrics.port).toBeGreaterThan(0);
    // Private: not published on the host, and refused by the balancer.
    expect(JSON.stringify(broker!.ports ?? [])).not.toContain(String(config.metrics.port));
    expect(await read('docker/nginx.conf')).toMatch(/location = \/metrics \{\s*return 404;/);
  });
});

describe('the Dockerfile and the ignore files', () => {
  it('runs as a non-root user with DATA_DIR on a volume that user owns', async () => {
    const dockerfile = await read('Dockerfile');
    const env = await imageEnv();
    expect(dockerfile).toMatch(/^USER node$/m);
    expect(env.DATA_DIR).toBe('/data');
    expect(dockerfile).toContain('chown node:node /data');
    expect(dockerfile).toMatch(/^VOLUME \["\/data"\]$/m);
    expect(dockerfile).toMatch(/^CMD \["node", "dist\/main.js"\]$/m);
    // The operating guide names the Node the image runs.
    const node = /^ARG NODE_VERSION=(\d+)$/m.exec(dockerfile)![1]!;
    expect(await read('docs/operating.md')).toContain(`Node ${node}`);
  });

  it('keeps operator keys and exports out of git and out of the image', async () => {
    const privateKeys = ['operator-keys/operator-private.jwk.json', 'new-keys/operator-private.jwk.json', 'exports/installations.csv'];
    const { stdout } = await promisify(execFile)('git', ['check-ignore', '--no-index', ...privateKeys, 'installations.csv'], { cwd: ROOT });
    expect(stdout.trim().split('\n').sort()).toEqual([...privateKeys, 'installations.csv'].sort());

    const dockerignore = (await read('.dockerignore')).split('\n').map((l) => l.trim());
    for (const pattern of ['operator-keys', 'new-keys', 'exports', '**/*.jwk.json', '**/.env']) expect(dockerignore).toContain(pattern);
  });
});

describe('docker/nginx.conf', () => {
  it('re-resolves the replicas and overwrites X-Forwarded-For', async () => {
    const conf = await readFile(SHIPPED_NGINX_CONF, 'utf8');
    // A name in a variable is resolved while running, through the resolver, with a short validity.
    expect(conf).toMatch(/^resolver 127\.0\.0\.11 valid=\d+s/m);
    expect(conf).toMatch(/set \$brokers broker:8787;/);
    expect(conf).toMatch(/proxy_pass http:\/\/\$brokers;/);
    expect(conf).not.toMatch(/^\s*upstream\b/m);
    expect(conf).toMatch(/proxy_set_header X-Forwarded-For \$remote_addr;/);
    expect(conf).not.toContain('$proxy_add_x_forwarded_for');
  });
});
