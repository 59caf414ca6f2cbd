import { pino } from 'pino';
import { ComposioFailure, type ComposioGateway, type ComposioGatewayOptions, createComposioGateway } from '../../src/composio/index.js';
import { composioFailureAnswer } from '../../src/http/composio-failures.js';
import { type Simulator, type SimulatorOptions, startSimulator } from '../../src/sim/index.js';

interface CallRecord {
  operation: string;
  outcome: string;
  seconds: number;
}

export interface Harness {
  sim: Simulator;
  gateway: ComposioGateway;
  calls: CallRecord[];
  close(): Promise<void>;
}

export const silentLogger = pino({ level: 'silent' });

/**
 * A fresh simulator and a gateway pointed at it through the real SDK. `simulator`: options of
 * the simulator (a kinder reading of Composio for one test; strict by default).
 */
export async function startHarness(
  overrides: Partial<ComposioGatewayOptions> = {},
  simulator: Partial<Omit<SimulatorOptions, 'apiKey'>> = {},
): Promise<Harness> {
  const sim = await startSimulator({ apiKey: 'sim_test_key', logger: false, ...simulator });
  const calls: CallRecord[] = [];
  const gateway = createComposioGateway({
    apiKey: sim.apiKey,
    baseUrl: sim.origin,
    callsPerMinute: 60_000,
    timeoutMs: 2_000,
    logger: silentLogger,
    onCall: (operation, outcome, seconds) => calls.push({ operation, outcome, seconds }),
    ...overrides,
  });
  return { sim, gateway, calls, close: () => sim.close() };
}

/** A call's failure as a client would see it: the status, code, sentence and headers the broker answers. */
export function answered<T>(promise: Promise<T>): Promise<T> {
  return promise.catch((error: unknown) => {
    throw error instanceof ComposioFailure ? composioFailureAnswer(error) : error;
  });
}

/** The project's auth configs for a toolkit, as the simulator holds them. */
export function authConfigsOf(h: Harness, toolkit: string) {
  return h.sim.controls
    .state()
    .authConfigs.filter((c) => c.toolkit.slug === toolkit)
    .map((c) => ({
      id: c.id,
      toolkit: c.toolkit.slug,
      authScheme: c.auth_scheme,
      isComposioManaged: c.is_composio_managed,
      enabled: c.status === 'ENABLED',
    }));
}

/** The link token at the end of a consent URL. */
export function linkToken(url: string): string {
  const token = new URL(url).pathname.split('/').pop();
  if (!token) throw new Error(`no link token in ${url}`);
  return decodeURIComponent(token);
}

/** A connected, ACTIVE account made through the real flow: Session, link, consent. */
export async function connectAccount(h: Harness, userId: string, toolkit: string, alias: string) {
  const session = await h.gateway.createSession(userId);
  const link = await h.gateway.createLink(session.sessionId, toolkit, { alias });
  h.sim.controls.authorizeLink(linkToken(link.url));
  return { session, link, accountId: link.connectedAccountId };
}
