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
