import { randomBytes, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { InjectOptions } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { composioUserIdFor } from '../../src/installations/tokens.js';
import { type Harness, startHarness } from '../composio/harness.js';
import { adminClaims, operatorKey, signClaims, type TestOperatorKey, trusting } from '../operators/support.js';
import { buildTestApp, register, type TestApp } from '../support/app.js';
import { githubCommitBody } from '../triggers/support.js';

/**
 * Every route that openapi.yaml says needs a token refuses a request without a good one, before
 * it does anything: no row written, no call to Composio. The list comes from openapi.yaml, so a
 * new route is covered without touching this file.
 */

interface Parameter {
  name: string;
  in: string;
  required?: boolean;
  schema?: { format?: string };
}
interface Operation {
  security?: Array<Record<string, unknown>>;
  parameters?: Parameter[];
  requestBody?: unknown;
}
interface Route {
  readonly name: string;
  /** The route's path parameters. */
  readonly parameters: readonly string[];
  /** A request the route would take, its path parameters from `ids` when given there. */
  readonly request: (ids?: Readonly<Record<string, string>>) => InjectOptions;
}

const METHODS = ['get', 'put', 'post', 'patch', 'delete'] as const;

function routesSecuredBy(scheme: string): Route[] {
  const spec = parse(readFileSync(new URL('../../openapi.yaml', import.meta.url), 'utf8')) as {
    paths: Record<string, Partial<Record<(typeof METHODS)[number], Operation>> & { parameters?: Parameter[] }>;
  };
  return Object.entries(spec.paths).flatMap(([path, item]) =>
    METHODS.flatMap((method) => {
      const operation = item[method];
      if (!operation?.security?.some((requirement) => scheme in requirement)) return [];
      const parameters = [...(item.parameters ?? []), ...(operation.parameters ?? [])];
      return [
        {
          name: `${method.toUpperCase()} ${path}`,
          parameters: parameters.filter((p) => p.in === 'path').map((p) => p.name),
          request: (ids = {}) => requestFor(method, path, parameters, operation, ids),
        },
      ];
    }),
  );
}

/** A request the route would take from its owner: plausible ids, its required headers, a JSON body. */
function requestFor(
  method: string,
  path: string,
  parameters: Parameter[],
  operation: Operation,
  ids: Readonly<Record<string, string>>,
): InjectOptions {
  const value = (name: string) =>
    ids[name] ?? (parameters.find((p) => p.name === name)?.schema?.format === 'uuid' ? randomUUID() : 'authsuite1');
  const headers: Record<string, string> = {};
  for (const p of parameters) if (p.in === 'header' && p.required) headers[p.name] = value(p.name);
  return {
    method: method.toUpperCase() as InjectOptions['method'],
    url: path.replace(/\{([^}]+)\}/g, (_, name: string) => value(name)),
    headers,
    ...(operation.requestBody ? { payload: {} } : {}),
  };
}

const installationRoutes = routesSecuredBy('installationToken');
const operatorRoutes = routesSecuredBy('operatorToken');

let t: TestApp;
let h: Harness;
let key: TestOperatorKey;
let disabledToken: string;

beforeAll(async () => {
  [h, key] = await Promise.all([startHarness(), operatorKey('op-auth')]);
  t = await buildTestApp(trusting(key), { composio: h.gateway });
  const disabled = await register(t.app);
  disabledToken = disabled.token;
  const admin = { authorization: `Bearer ${await signClaims(key, adminClaims(t.clock.now()))}` };
  const response = await t.app.inject({
    method: 'POST',
    url: `/v1/admin/installations/${disabled.installationId}/disable`,
    headers: admin,
  });
  expect(response.statusCode).toBe(200);
});
afterAll(async () => {
  await t?.close();
  await h?.close();
});

/**
 * Every row of every table, as text: what a refused request must leave as it was. The limits'
 * own counters are left out: counting a request, refused or not, is what they are for.
 */
async function everyRow(): Promise<string> {
  const tables = await t.database.sql<{ name: string }[]>`
    select tablename as name from pg_tables
     where schemaname = 'public' and tablename not in ('rate_limit_counters', 'composio_budgets')
     order by tablename`;
  const dumps = await Promise.all(
    tables.map(({ name }) =>
      t.database.sql.unsafe(`select coalesce(string_agg(r::text, E'\\n' order by r::text), '') as rows from "${name}" r`),
    ),
  );
  return tables.map(({ name }, i) => `${name}:\n${dumps[i]![0]!.rows}`).join('\n');
}

/** Sends each request and proves nothing was written to Postgres or sent to Composio meanwhile. */
async function refusedWithoutEffect(route: Route, authorizations: Array<string | undefined>) {
  const before = await everyRow();
  const composioCalls = h.sim.controls.requests().length;
  const responses = [];
  for (const authorization of authorizations) {
    const request = route.request();
    responses.push(await t.app.inject({ ...request, headers: { ...request.headers, ...(authorization ? { authorization } : {}) } }));
  }
  expect(h.sim.controls.requests().length).toBe(composioCalls);
  expect(await everyRow()).toBe(before);
  return responses;
}

describe('installation routes', () => {
  it('are listed in openapi.yaml', () => {
    expect(installationRoutes.length).toBeGreaterThan(0);
  });

  it.each(installationRoutes.map((route) => [route.name, route] as const))(
    '%s: 401 for a missing and an unknown token, 403 installation_disabled for a disabled one',
    async (_name, route) => {
      const unknown = `Bearer ${randomBytes(32).toString('hex')}`;
      const [missing, unknownToken, disabled] = await refusedWithoutEffect(route, [undefined, unknown, `Bearer ${disabledToken}`]);
      for (const response of [missing!, unknownToken!]) {
        expect(response.statusCode).toBe(401);
        expect(response.json()).toEqual({ error: expect.any(String), code: 'unauthorized' });
      }
      expect(disabled!.statusCode).toBe(403);
      expect(disabled!.json()).toEqual({ error: expect.any(String), code: 'installation_disabled' });
    },
  );
});

describe('operator routes', () => {
  it('are listed in openapi.yaml', () => {
    expect(operatorRoutes.length).toBeGreaterThan(0);
  });

  it.each(operatorRoutes.map((route) => [route.name, route] as const))(
    '%s: 401 for a missing token, garbage, and an installation token',
    async (_name, route) => {
      const installation = await register(t.app);
      const [missing, garbage, wrongKind] = await refusedWithoutEffect(route, [
        undefined,
        'Bearer not.a.token',
        installation.auth.authorization,
      ]);
      expect(missing!.statusCode).toBe(401);
      expect(missing!.json()).toEqual({ error: expect.stringMatching(/missing operator token/), code: 'operator_unauthorized' });
      for (const response of [garbage!, wrongKind!]) {
        expect(response.statusCode).toBe(401);
        expect(response.json()).toEqual({ error: expect.stringMatching(/invalid operator token/), code: 'operator_unauthorized' });
      }
    },
  );
});

describe('installation routes, given another installation’s ids', () => {
  /** B's: a connected GitHub account and a trigger on it, made as B would make them. */
  let b: { installationId: string; auth: { authorization: string } };
  let ids: Record<string, string>;
  let a: { auth: { authorization: string } };

  beforeAll(async () => {
    [a, b] = [await register(t.app), await register(t.app)];
    const account = h.sim.controls.createAccount({
      userId: composioUserIdFor(b.installationId),
      toolkit: 'github',
      alias: 'work',
      status: 'ACTIVE',
    });
    const created = await t.app.inject({
      method: 'POST',
      url: '/v1/triggers',
      headers: b.auth,
      payload: githubCommitBody(account.id, { automationId: 'auth-suite' }),
    });
    expect(created.statusCode).toBe(201);
    ids = { id: created.json().id, accountId: account.id, slug: 'github' };
  });

  /** Everything B has: its rows in every table that names an installation, and its account and triggers on Composio. */
  async function whatBHas(): Promise<string> {
    const tables = await t.database.sql<{ name: string; column: string }[]>`
      select table_name as name, column_name as column from information_schema.columns
       where table_schema = 'public' and column_name in ('installation_id', 'holder_installation_id')
         and table_name in (select tablename from pg_tables where schemaname = 'public')
       order by table_name`;
    const dumps = await Promise.all(
      tables.map(({ name, column }) =>
        t.database.sql.unsafe(
          `select coalesce(string_agg(r::text, E'\\n' order by r::text), '') as rows from "${name}" r where "${column}" = $1`,
          [b.installationId],
        ),
      ),
    );
    const [row] = await t.database.sql`select * from installations where id = ${b.installationId}`;
    const userId = composioUserIdFor(b.installationId);
    const [account, triggers] = await Promise.all([
      h.gateway.findConnectedAccount(userId, ids.accountId!),
      h.gateway.listActiveTriggers({ connectedAccountIds: [ids.accountId!], limit: 50 }),
    ]);
    return [
      JSON.stringify(row),
      ...tables.map(({ name }, i) => `${name}: ${dumps[i]![0]!.rows}`),
      JSON.stringify(account),
      JSON.stringify(triggers),
    ].join('\n');
  }

  const withIds = installationRoutes.filter((route) => route.parameters.some((name) => name !== 'slug'));

  it('take an id of B’s in their path', () => {
    expect(withIds.map((route) => route.name).sort()).toEqual(
      [
        'DELETE /v1/connectors/{slug}/accounts/{accountId}',
        'DELETE /v1/triggers/{id}',
        'GET /v1/triggers/{id}',
        'PATCH /v1/triggers/{id}',
        'POST /v1/triggers/{id}/test',
      ].sort(),
    );
  });

  /** A body the route takes, where `{}` would be refused before the id is looked at. */
  const bodies: Record<string, unknown> = { 'PATCH /v1/triggers/{id}': { enabled: false } };

  it.each(withIds.map((route) => [route.name, route] as const))(
    '%s: A’s token with B’s id is answered as an id nobody owns, and leaves B as it was',
    async (_name, route) => {
      const send = (pathIds: Record<string, string>) => {
        const request = route.request(pathIds);
        return t.app.inject({
          ...request,
          headers: { ...request.headers, ...a.auth },
          ...(route.name in bodies ? { payload: bodies[route.name] as object } : {}),
        });
      };
      const before = await whatBHas();
      const withBs = await send(ids);
      expect(await whatBHas()).toBe(before);
      // Nothing tells A that the id exists: the answer is the one an unknown id gets.
      const withNobodys = await send({ ...ids, id: randomUUID(), accountId: 'ca_nobody0000' });
      expect({ status: withBs.statusCode, body: withBs.json() }).toEqual({ status: withNobodys.statusCode, body: withNobodys.json() });
      expect(withBs.statusCode === 404 || withBs.json().removed === 0).toBe(true);
    },
  );
});
