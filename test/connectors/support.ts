import type { FastifyInstance } from 'fastify';
import type { Env } from '../../src/config.js';
import { type Harness, startHarness } from '../composio/harness.js';
import { buildTestApp, register, type TestApp } from '../support/app.js';

export interface ConnectorsWorld {
  t: TestApp;
  h: Harness;
  close(): Promise<void>;
}

/** The broker with its gateway pointed at a fresh simulator (strict unless `simulator` says), through the real SDK. */
export async function startWorld(env: Env = {}, simulator: Parameters<typeof startHarness>[1] = {}): Promise<ConnectorsWorld> {
  const h = await startHarness({}, simulator);
  const t = await buildTestApp({ CONNECTOR_REQUESTS_PER_MINUTE: '10000', ...env }, { composio: h.gateway });
  return {
    t,
    h,
    async close() {
      await t.close();
      await h.close();
    },
  };
}

export interface Member {
  installationId: string;
  token: string;
  auth: { authorization: string };
  userId: string;
}

export async function member(app: FastifyInstance): Promise<Member> {
  const registered = await register(app);
  return { ...registered, userId: `omb_${registered.installationId.replaceAll('-', '')}` };
}

/** Composio requests the simulator saw since `since`, as `METHOD path`. */
export function composioRequests(h: Harness, since = 0): string[] {
  return h.sim.controls
    .requests()
    .slice(since)
    .map((r) => `${r.method} ${r.path}`);
}
