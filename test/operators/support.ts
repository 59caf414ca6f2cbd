import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { base64url, type CryptoKey, type JWK, type JWTPayload, SignJWT } from 'jose';
import { generateOperatorKeyPair, importOperatorSigningKey, type OperatorSigningKey } from '../../src/operator-keys/keys.js';
import { ADMIN_AUDIENCE } from '../../src/operators/admin-tokens.js';
import { runCli as runOperatorCli } from '../../src/operators/cli/run.js';
import { GRANT_AUDIENCE } from '../../src/plans/grants.js';
import { nodeArguments } from '../support/broker-process.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export interface TestOperatorKey {
  readonly kid: string;
  readonly privateJwk: JWK;
  readonly publicJwk: JWK;
  readonly signer: OperatorSigningKey;
}

export async function operatorKey(kid: string): Promise<TestOperatorKey> {
  const { privateJwk, publicJwks } = await generateOperatorKeyPair(kid);
  return { kid, privateJwk, publicJwk: publicJwks.keys[0]!, signer: await importOperatorSigningKey(privateJwk) };
}

/** The environment that makes a broker trust these keys. */
export function trusting(...keys: TestOperatorKey[]): { OPERATOR_PUBLIC_KEYS: string } {
  return { OPERATOR_PUBLIC_KEYS: JSON.stringify({ keys: keys.map((k) => k.publicJwk) }) };
}

const seconds = (at: Date) => Math.floor(at.getTime() / 1000);

/** A grant's claims at `now`, valid 30 days; override any of them (undefined removes one). */
export function grantClaims(now: Date, overrides: Partial<Record<string, unknown>> = {}): JWTPayload {
  return withOverrides(
    {
      sub: 'cloud-1',
      plan: 'paid',
      iss: 'openmausbot',
      aud: GRANT_AUDIENCE,
      iat: seconds(now),
      exp: seconds(now) + 30 * 86_400,
      jti: randomUUID(),
    },
    overrides,
  );
}

/** An admin token's claims at `now`, valid 10 minutes. */
export function adminClaims(now: Date, overrides: Partial<Record<string, unknown>> = {}): JWTPayload {
  return withOverrides(
    { sub: 'ana', iss: 'openmausbot', aud: ADMIN_AUDIENCE, iat: seconds(now), exp: seconds(now) + 600, jti: randomUUID() },
    overrides,
  );
}

function withOverrides(claims: Record<string, unknown>, overrides: Partial<Record<string, unknown>>): JWTPayload {
  const merged: Record<string, unknown> = { ...claims, ...overrides };
  for (const [name, value] of Object.entries(overrides)) if (value === undefined) delete merged[name];
  return merged as JWTPayload;
}

/** Signs exactly these claims with EdDSA, under `kid` (the key's own unless told otherwise). */
export function signClaims(key: TestOperatorKey, claims: JWTPayload, header: { kid?: string | null } = {}): Promise<string> {
  const kid = header.kid === null ? undefined : (header.kid ?? key.kid);
  return new SignJWT(claims).setProtectedHeader({ alg: 'EdDSA', typ: 'JWT', ...(kid === undefined ? {} : { kid }) }).sign(key.signer.key);
}

/** Signs with any algorithm and key: the shapes an attacker would try. */
export function signWith(alg: string, key: CryptoKey | Uint8Array, claims: JWTPayload, kid: string): Promise<string> {
  return new SignJWT(claims).setProtectedHeader({ alg, kid, typ: 'JWT' }).sign(key);
}

/** `alg: none`: a header and claims with an empty signature. */
export function unsigned(claims: JWTPayload, kid: string): string {
  const part = (value: unknown) => base64url.encode(JSON.stringify(value));
  return `${part({ alg: 'none', kid, typ: 'JWT' })}.${part(claims)}.`;
}

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** The operator CLI in this process, with exactly this environment and nothing of the test's own. */
export async function runCli(args: string[], env: Record<string, string> = {}): Promise<CliRun> {
  let stdout = '';
  let stderr = '';
  const code = await runOperatorCli(args, { out: (text) => (stdout += text), err: (text) => (stderr += text) }, env);
  return { code, stdout, stderr };
}

/**
 * The operator CLI as an operator runs it, in its own process: by default the image's entry, the
 * run's compiled `dist/operators/cli.js` when there is one (see broker-process.ts); `via: 'tsx'`
 * `npm run cli`'s, the source through tsx.
 */
export async function spawnCli(args: string[], env: Record<string, string> = {}, options: { via?: 'node' | 'tsx' } = {}): Promise<CliRun> {
  const entry = options.via === 'tsx' ? ['--import', 'tsx', 'src/operators/cli.ts'] : await nodeArguments('operators/cli');
  const child = spawn(process.execPath, [...entry, ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** A row of `operator_audit` as the tests read it back. */
export interface AuditRow {
  operator: string;
  token_id: string | null;
  source: string;
  action: string;
  target: string | null;
  outcome: string;
}
