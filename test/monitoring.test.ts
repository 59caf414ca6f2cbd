import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { createMetrics } from '../src/metrics/metrics.js';
import { buildTestApp, type TestApp } from './support/app.js';
import { createTestDatabase } from './support/database.js';

/**
 * docker/prometheus and docker/grafana against the broker: every broker metric the rules and the
 * dashboard query is one a broker really exports, and compose wires them in. promtool's own
 * checks of the same files need Debian's `prometheus` package: monitoring.system.test.ts.
 */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const DOCKER = path.join(ROOT, 'docker');

let t: TestApp;
const METRICS_TOKEN = 'metrics-token-for-the-dashboard-test';
beforeAll(async () => {
  // As main.ts makes them: the default process metrics too.
  t = await buildTestApp({ METRICS_TOKEN }, { metrics: createMetrics() });
});
afterAll(() => t.close());

/** Every metric family a broker exports, with a histogram's series names. */
async function exportedNames(): Promise<Set<string>> {
  const response = await t.app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
  expect(response.statusCode).toBe(200);
  const names = new Set<string>();
  for (const match of response.body.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    const [, name, type] = match as unknown as [string, string, string];
    names.add(name);
    if (type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(`${name}${suffix}`);
    if (type === 'summary') for (const suffix of ['_sum', '_count']) names.add(`${name}${suffix}`);
  }
  return names;
}

/** The broker's metric names an expression uses (they all start with `omb_`). */
const brokerMetrics = (expr: string) => [...expr.matchAll(/\bomb_[a-z0-9_]+\b/g)].map((m) => m[0]);

async function ruleExpressions(): Promise<string[]> {
  const rules = parse(await readFile(path.join(DOCKER, 'prometheus/alerts.yml'), 'utf8')) as {
    groups: { rules: { alert: string; expr: string }[] }[];
  };
  return rules.groups.flatMap((g) => g.rules.map((r) => r.expr));
}

async function dashboardExpressions(): Promise<string[]> {
  const dashboard = JSON.parse(await readFile(path.join(DOCKER, 'grafana/dashboards/omb-broker.json'), 'utf8')) as {
    panels: { title: string; targets: { expr: string }[] }[];
  };
  return dashboard.panels.flatMap((p) => p.targets.map((target) => target.expr));
}

describe('the rules and the dashboard', () => {
  it('query only metrics the broker exports', async () => {
    const exported = await exportedNames();
    const expressions = [...(await ruleExpressions()), ...(await dashboardExpressions())];
    const used = new Set(expressions.flatMap(brokerMetrics));
    expect(used.size).toBeGreaterThanOrEqual(8);
    expect([...used].filter((name) => !exported.has(name))).toEqual([]);
  });

  it('cover what the operators watch', async () => {
    const rules = (await ruleExpressions()).join('\n');
    for (const needed of [
      'omb_oldest_unacknowledged_event_age_seconds',
      'outcome="bad_signature"',
      'upstream_rate_limited',
      'omb_database_up',
      'omb_triggers_active',
      'omb_events_unreadable_total',
    ]) {
      expect(rules).toContain(needed);
    }
    const dashboard = (await dashboardExpressions()).join('\n');
    for (const needed of [
      'omb_webhooks_total',
      'omb_queue_depth',
      'omb_oldest_unacknowledged_event_age_seconds',
      'omb_long_polls_waiting',
      'omb_composio_calls_total',
      'omb_composio_call_duration_seconds_bucket',
      'histogram_quantile(0.99, sum by (le, route) (rate(omb_http_request_duration_seconds_bucket',
    ]) {
      expect(dashboard).toContain(needed);
    }
  });

  it('are checked against a scrape that really carries the new gauges', async () => {
    const response = await t.app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
    expect(response.body).toMatch(/^omb_database_up 1$/m);
    expect(response.body).toMatch(/^omb_triggers_active 0$/m);
  });

  it('still answers a scrape when the database is away, with omb_database_up 0', async () => {
    const database = await createTestDatabase();
    const away = await buildTestApp({ METRICS_TOKEN }, { database, metrics: createMetrics({ defaultMetrics: false }) });
    try {
      await database.sql.end({ timeout: 1 });
      const response = await away.app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
      expect(response.statusCode).toBe(200);
      expect(response.body).toMatch(/^omb_database_up 0$/m);
    } finally {
      await away.close();
      await database.drop();
    }
  });

  it('is wired into compose as the optional "monitoring" profile', async () => {
    const compose = parse(await readFile(path.join(DOCKER, 'compose.yml'), 'utf8')) as {
      services: Record<string, { profiles?: string[]; volumes?: string[]; environment?: Record<string, string> }>;
    };
    expect(compose.services.prometheus?.profiles).toEqual(['monitoring']);
    expect(compose.services.grafana?.profiles).toEqual(['monitoring']);
    expect(compose.services.prometheus?.volumes).toContain('./prometheus:/etc/prometheus:ro');
    expect(compose.services.grafana?.volumes).toContain('./grafana/dashboards:/var/lib/grafana/dashboards:ro');
    expect(compose.services.broker?.environment?.METRICS_PORT).toBe('9464');
    const scrape = parse(await readFile(path.join(DOCKER, 'prometheus/prometheus.yml'), 'utf8'));
    expect(scrape.scrape_configs[0].dns_sd_configs[0]).toMatchObject({ names: ['broker'], port: 9464 });
  });
});
