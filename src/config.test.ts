import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from './config.js';

describe('loadConfig', () => {
  it('runs with no environment at all: embedded Postgres and sandbox Composio', () => {
    const config = loadConfig({});
    expect(config.port).toBe(8787);
    expect(config.host).toBe('127.0.0.1');
    expect(config.databaseUrl).toBeUndefined();
    expect(config.dataDir).toBe('./.data');
    expect(config.composio.apiKey).toBeUndefined();
    expect(config.composio.baseUrl).toBe('https://backend.composio.dev');
    expect(config.registrationMode).toBe('open');
    expect(config.operators.issuer).toBe('openmausbot');
    expect(config.quotas).toEqual({ standard: 500, paid: 2000 });
    expect(config.limits.registrationsPerMinute).toBe(30);
    expect(config.limits.connectorRequestsPerMinute).toBe(120);
    expect(config.events.retentionDays).toBe(7);
    expect(config.events.pollMaxWaitSeconds).toBe(25);
    expect(config.events.testsPerDay).toBe(20);
    expect(config.auditRetentionDays).toBe(400);
    expect(Object.isFrozen(config)).toBe(true);
  });

  it.each([
    [{ PORT: 'eighty' }, 'PORT'],
    [{ PORT: '70000' }, 'PORT'],
    [{ DATABASE_URL: 'mysql://x' }, 'DATABASE_URL'],
    [{ REGISTRATION_MODE: 'maybe' }, 'REGISTRATION_MODE'],
    [{ COMPOSIO_BASE_URL: 'not a url' }, 'COMPOSIO_BASE_URL'],
    [{ COMPOSIO_API_KEY: 'ak_x' }, 'COMPOSIO_WEBHOOK_SECRET'],
    [{ OPERATOR_PUBLIC_KEYS: '{nope' }, 'OPERATOR_PUBLIC_KEYS'],
    [{ OPERATOR_PUBLIC_KEYS: '{"keys":[{"kty":"OKP","crv":"Ed25519","x":"a","d":"b"}]}' }, 'OPERATOR_PUBLIC_KEYS'],
    [{ LOG_LEVEL: 'loud' }, 'LOG_LEVEL'],
    [{ QUOTA_PAID: '-1' }, 'QUOTA_PAID'],
    // Above the route's cap it would be ignored, so it is refused at start.
    [{ POLL_MAX_WAIT_SECONDS: '26' }, 'POLL_MAX_WAIT_SECONDS'],
    // `true` would believe whatever x-forwarded-for a client writes.
    [{ TRUST_PROXY: 'true' }, 'TRUST_PROXY'],
    // Production (the image) needs the real Composio unless the simulator is asked for by name.
    [{ NODE_ENV: 'production' }, 'COMPOSIO_API_KEY'],
    [{ SANDBOX: 'true', COMPOSIO_API_KEY: 'ak_x', COMPOSIO_WEBHOOK_SECRET: 's' }, 'SANDBOX'],
    [{ SANDBOX: 'maybe' }, 'SANDBOX'],
    [{ TRUST_PROXY: 'yes' }, 'TRUST_PROXY'],
    [{ TRUST_PROXY: '10.0.0.0/33' }, 'TRUST_PROXY'],
    [{ TRUST_PROXY: 'proxy.internal' }, 'TRUST_PROXY'],
    [{ TRUST_PROXY: '11' }, 'TRUST_PROXY'],
    [{ POLL_MAX_WAIT_SECONDS: '60' }, 'POLL_MAX_WAIT_SECONDS'],
    [{ AUDIT_RETENTION_DAYS: '0' }, 'AUDIT_RETENTION_DAYS'],
    [{ TRIGGER_TESTS_PER_DAY: 'many' }, 'TRIGGER_TESTS_PER_DAY'],
  ])('stops on %j naming %s', (env, variable) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    try {
      loadConfig(env);
    } catch (error) {
      expect((error as ConfigError).message).toContain(variable);
    }
  });

  it('reads a number setting as decimal digits only: an empty value is not 0, nor 0x50 80, and a wrong one is quoted back', () => {
    const refusal = (env: Record<string, string>) => {
      try {
        loadConfig(env);
      } catch (error) {
        if (error instanceof ConfigError) return error.message;
        throw error;
      }
      throw new Error(`${JSON.stringify(env)} was taken`);
    };
    // `QUOTA_STANDARD=` in an env file kept no event on the standard plan; `PORT=` listened on a free port.
    expect(refusal({ QUOTA_STANDARD: '' })).toContain('QUOTA_STANDARD: is empty; leave it unset for its default, or give a whole number');
    expect(refusal({ PORT: '  ' })).toContain('PORT: is empty');
    expect(refusal({ METRICS_PORT: '' })).toContain('METRICS_PORT: is empty');
    expect(refusal({ POLL_MAX_WAIT_SECONDS: '' })).toContain('POLL_MAX_WAIT_SECONDS: is empty');
    expect(refusal({ PORT: '0x1F90' })).toContain('PORT: must be a whole number in decimal digits, not "0x1F90"');
    expect(refusal({ SHUTDOWN_GRACE_MS: '1e3' })).toContain('SHUTDOWN_GRACE_MS: must be a whole number in decimal digits, not "1e3"');
    expect(refusal({ DATABASE_POOL_SIZE: '2.0' })).toContain('not "2.0"');
    expect(refusal({ PORT: 'x'.repeat(500) })).toContain(`not "${'x'.repeat(40)}"`);
    expect(refusal({ PORT: '70000' })).toContain('PORT: must be from 0 to 65,535');
    // One line, the range's, however many digits.
    expect(refusal({ PORT: '9'.repeat(400) })).toBe('invalid configuration:\n  - PORT: must be from 0 to 65,535');
    expect(loadConfig({ PORT: ' 8080 ' }).port).toBe(8080);
    expect(loadConfig({ QUOTA_STANDARD: '0' }).quotas.standard).toBe(0);
  });

  it('drops the spaces around an address, a folder, a URL or the issuer, and refuses one that is only spaces', () => {
    // ` 127.0.0.1 ` was listened on as a host name, and in sandbox mode stopped the broker with
    // "webhook_url must be a valid URL"; ` ` was a folder named by a space.
    const config = loadConfig({
      HOST: ' 127.0.0.1 ',
      SANDBOX_HOST: '0.0.0.0 ',
      DATA_DIR: ' /var/lib/omb ',
      OPERATOR_ISSUER: ' openmausbot-test ',
      COMPOSIO_BASE_URL: ' https://backend.composio.dev/ ',
      PUBLIC_URL: ' https://broker.example/ ',
    });
    expect(config.host).toBe('127.0.0.1');
    expect(config.composio.sandboxHost).toBe('0.0.0.0');
    expect(config.dataDir).toBe('/var/lib/omb');
    expect(config.operators.issuer).toBe('openmausbot-test');
    expect(config.composio.baseUrl).toBe('https://backend.composio.dev');
    expect(config.publicUrl).toBe('https://broker.example');
    for (const name of ['HOST', 'SANDBOX_HOST', 'DATA_DIR', 'OPERATOR_ISSUER']) {
      expect(() => loadConfig({ [name]: '  ' })).toThrow(`${name}: is empty; leave it unset for its default, or give a value`);
    }
  });

  it('takes POLL_MAX_WAIT_SECONDS up to the route’s cap of 25 s', () => {
    expect(loadConfig({ POLL_MAX_WAIT_SECONDS: '25' }).events.pollMaxWaitSeconds).toBe(25);
    expect(loadConfig({ POLL_MAX_WAIT_SECONDS: '5' }).events.pollMaxWaitSeconds).toBe(5);
    expect(() => loadConfig({ POLL_MAX_WAIT_SECONDS: '26' })).toThrow(/POLL_MAX_WAIT_SECONDS: must be at most 25/);
  });

  it('takes TRUST_PROXY as off, a hop count, or proxy addresses and CIDRs', () => {
    expect(loadConfig({}).trustProxy).toBe(false);
    expect(loadConfig({ TRUST_PROXY: 'false' }).trustProxy).toBe(false);
    expect(loadConfig({ TRUST_PROXY: '0' }).trustProxy).toBe(false);
    expect(loadConfig({ TRUST_PROXY: '1' }).trustProxy).toBe(1);
    expect(loadConfig({ TRUST_PROXY: '2' }).trustProxy).toBe(2);
    expect(loadConfig({ TRUST_PROXY: ' 10.0.0.0/8, 127.0.0.1 ,fd00::/8,uniquelocal' }).trustProxy).toEqual([
      '10.0.0.0/8',
      '127.0.0.1',
      'fd00::/8',
      'uniquelocal',
    ]);
    expect(() => loadConfig({ TRUST_PROXY: 'true' })).toThrow(/TRUST_PROXY: true would believe any x-forwarded-for/);
  });

  it('refuses target_session_attrs=read-write, which picks a hot standby too, and takes primary', () => {
    const hosts = 'postgres://omb@db-a:5432,db-b:5432/omb';
    expect(() => loadConfig({ DATABASE_URL: `${hosts}?target_session_attrs=read-write` })).toThrow(
      /DATABASE_URL: target_session_attrs=read-write .* use target_session_attrs=primary/,
    );
    expect(() => loadConfig({ DATABASE_URL: `${hosts}?sslmode=require&target_session_attrs=read-write` })).toThrow(ConfigError);
    expect(loadConfig({ DATABASE_URL: `${hosts}?target_session_attrs=primary` }).databaseUrl).toBe(`${hosts}?target_session_attrs=primary`);
  });

  it('runs the simulator in production only when SANDBOX=true, and the CLI without a key', () => {
    const keys = { DATA_ENCRYPTION_KEYS: `k1:${Buffer.alloc(32, 1).toString('base64')}` };
    expect(loadConfig({ ...keys, NODE_ENV: 'production', SANDBOX: 'true', SANDBOX_HOST: '0.0.0.0' }).composio).toMatchObject({
      apiKey: undefined,
      sandboxHost: '0.0.0.0',
    });
    expect(loadConfig({ ...keys, NODE_ENV: 'production', COMPOSIO_API_KEY: 'ak_x', COMPOSIO_WEBHOOK_SECRET: 's' }).composio.apiKey).toBe(
      'ak_x',
    );
    expect(loadConfig({ NODE_ENV: 'production' }, { for: 'cli' }).composio.apiKey).toBeUndefined();
    expect(loadConfig({}).composio.sandboxHost).toBe('127.0.0.1');
  });

  it('requires DATA_ENCRYPTION_KEYS in production, and says what is wrong with them without their keys', () => {
    const key = Buffer.alloc(32, 9).toString('base64url');
    expect(() => loadConfig({ NODE_ENV: 'production', SANDBOX: 'true' })).toThrow(/DATA_ENCRYPTION_KEYS: required in production/);
    expect(
      loadConfig({ NODE_ENV: 'production', SANDBOX: 'true', DATA_ENCRYPTION_KEYS: `new:${key},old:${key}` }).dataKeys?.current.id,
    ).toBe('new');
    // The CLI needs none; nor does a broker outside production (it makes a key file).
    expect(loadConfig({ NODE_ENV: 'production' }, { for: 'cli' }).dataKeys).toBeUndefined();
    expect(loadConfig({}).dataKeys).toBeUndefined();
    const short = Buffer.alloc(16, 9).toString('base64');
    let problem = '';
    try {
      loadConfig({ DATA_ENCRYPTION_KEYS: `a:${short}` });
    } catch (error) {
      problem = (error as Error).message;
    }
    expect(problem).toContain('DATA_ENCRYPTION_KEYS: entry 1 (a): its key must be 32 bytes');
    expect(problem).not.toContain(short);
  });

  it('splits rotating webhook secrets and trims the base URL', () => {
    const config = loadConfig({
      COMPOSIO_API_KEY: 'ak_live',
      COMPOSIO_WEBHOOK_SECRET: ' new , old ',
      COMPOSIO_BASE_URL: 'https://composio.example/',
    });
    expect(config.composio.webhookSecrets).toEqual(['new', 'old']);
    expect(config.composio.baseUrl).toBe('https://composio.example');
  });
});
