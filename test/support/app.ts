import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../src/app.js';
import type { Clock } from '../../src/clock.js';
import { type ComposioGateway, createComposioGateway } from '../../src/composio/index.js';
import { type Config, type Env, loadConfig } from '../../src/config.js';
import type { EventsRuntime } from '../../src/events/runtime.js';
import { createLogger } from '../../src/logger.js';
import type { Metrics } from '../../src/metrics/metrics.js';
import { TEST_DATA_KEYS } from './data-keys.js';
import { createTestDatabase, type TestDatabase } from './database.js';
import { checkAnswers } from './openapi-check.js';

/** A clock a test moves by hand. */
class TestClock implements Clock {
  constructor(private current = new Date()) {}
  now(): Date {
    return new Date(this.current);
  }
  set(at: Date | string): void {
    this.current = new Date(at);
  }
  advance(ms: number): void {
    this.current = new Date(this.current.getTime() + ms);
  }
}

/** Every line the app logged, as raw text (to prove what never reaches the logs). */
export class LogCapture extends Writable {
  readonly lines: string[] = [];
  override _write(chunk: Buffer, _encoding: string, done: () => void): void {
    this.lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
    done();
  }
  get text(): string {
    return this.lines.join('\n');
  }
}

export interface TestApp {
  app: FastifyInstance;
  database: TestDatabase;
  config: Config;
  clock: TestClock;
  logs: LogCapture;
  close(): Promise<void>;
}

export interface TestAppOptions {
  /** Shared with other apps of the test file (it is then not dropped on close). */
  database?: TestDatabase;
  /** The Composio gateway, usually pointed at a simulator; by default one nothing answers. */
  composio?: ComposioGateway;
  metrics?: Metrics;
  /** The app's events runtime, for tests that look into the waiting room. */
  events?: EventsRuntime;
}

/** A gateway for apps whose tests never reach Composio: every call fails as unreachable. */
function unreachableComposio(logger = createLogger('silent')): ComposioGateway {
  return createComposioGateway({ apiKey: 'ak_unreachable', baseUrl: 'http://127.0.0.1:9', callsPerMinute: 600, timeoutMs: 2000, logger });
}

export async function buildTestApp(env: Env = {}, options: TestAppOptions = {}): Promise<TestApp> {
  const database = options.database ?? (await createTestDatabase());
  // Limits count in the database, shared by every app on it (as by every broker process): apps
  // sharing a test file's database would otherwise spend one registration allowance between
  // them. Tests of the registration limit set their own (and use an address of their own).
  const config = loadConfig({ LOG_LEVEL: 'info', REGISTRATIONS_PER_MINUTE: '100000', DATA_ENCRYPTION_KEYS: TEST_DATA_KEYS, ...env });
  const logs = new LogCapture();
  const clock = new TestClock();
  const logger = createLogger(config.logLevel, logs);
  const app = await buildApp({
    config,
    database,
    logger,
    clock,
    composio: options.composio ?? unreachableComposio(logger),
    ...(options.metrics ? { metrics: options.metrics } : {}),
    ...(options.events ? { events: options.events } : {}),
  });
  holdAnswersToTheReference(app);
  await app.ready();
  return {
    app,
    database,
    config,
    clock,
    logs,
    async close() {
      try {
        await app.close();
      } finally {
        if (!options.database) await database.drop();
      }
    },
  };
}

/**
 * Every answer of a test app is held against `openapi.yaml`, without a test asking: an answer
 * the reference does not describe fails the `app.inject` call that received it. Answers sent over
 * real HTTP (an app listening on loopback) are not returned through `inject`; their mismatches
 * fail the app's close instead.
 */
function holdAnswersToTheReference(app: FastifyInstance): void {
  const answers = checkAnswers(app);
  const inject = app.inject.bind(app) as unknown as (...args: unknown[]) => unknown;
  // Only the promise form is used by the tests; the chained and callback forms pass through unchecked.
  app.inject = ((...args: unknown[]) => {
    if (args.length !== 1 || args[0] === undefined) return inject(...args);
    return (inject(args[0]) as Promise<Parameters<typeof answers.claim>[0]>).then((response) => {
      answers.claim(response);
      return response;
    });
  }) as typeof app.inject;
  // Checked once the app has closed, so a mismatch cannot stop the rest of the close.
  const close = app.close.bind(app) as unknown as (...args: unknown[]) => unknown;
  app.close = ((...args: unknown[]) => {
    if (args.length > 0) return close(...args);
    return (close() as Promise<undefined>).then(() => {
      const unclaimed = answers.unclaimed();
      if (unclaimed.length > 0) throw new Error(`answers over HTTP that openapi.yaml does not describe:\n${unclaimed.join('\n')}`);
      return undefined;
    });
  }) as typeof app.close;
}

/** Registers an installation through the API and returns its id, token and auth header. */
export async function register(app: FastifyInstance): Promise<{ installationId: string; token: string; auth: { authorization: string } }> {
  const response = await app.inject({ method: 'POST', url: '/v1/installations', payload: {} });
  if (response.statusCode !== 201) throw new Error(`registration failed: ${response.statusCode} ${response.body}`);
  const body = response.json<{ installationId: string; token: string }>();
  return { ...body, auth: { authorization: `Bearer ${body.token}` } };
}
