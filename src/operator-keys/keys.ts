import { type CryptoKey, calculateJwkThumbprint, createLocalJWKSet, exportJWK, generateKeyPair, importJWK, type JWK } from 'jose';
import { ConfigError } from '../config.js';

/**
 * Operator keys: Ed25519 pairs whose private half stays with the operators and whose public half
 * the broker holds as a JWKS. Grants and admin tokens are EdDSA compact JWS naming their key by
 * `kid`, so several keys can be configured at once while one replaces another.
 */
export const OPERATOR_ALGORITHM = 'EdDSA';

/** The broker's side: the public keys, chosen by `kid`. */
export interface OperatorPublicKeys {
  readonly kids: ReadonlySet<string>;
  readonly resolve: ReturnType<typeof createLocalJWKSet>;
}

/** The operator's side: what signs grants and admin tokens. */
export interface OperatorSigningKey {
  readonly kid: string;
  readonly key: CryptoKey;
}

const BASE64URL_32_BYTES = /^[A-Za-z0-9_-]{43}$/;

/**
 * The configured JWKS as a key set, or null when none is configured (grants and the admin API
 * are then refused). Anything but Ed25519 public keys with distinct `kid`s is a configuration
 * error: an RSA or HMAC key here could only ever widen what the broker accepts.
 */
export function operatorPublicKeys(jwks: { keys: Record<string, unknown>[] } | undefined): OperatorPublicKeys | null {
  if (!jwks) return null;
  const problems: string[] = [];
  const kids = new Set<string>();
  jwks.keys.forEach((key, index) => {
    const where = `OPERATOR_PUBLIC_KEYS: key ${index + 1}`;
    const problem = publicKeyProblem(key);
    if (problem) problems.push(`${where}: ${problem}`);
    else if (kids.has(key.kid as string)) problems.push(`${where}: kid "${String(key.kid)}" is used twice`);
    else kids.add(key.kid as string);
  });
  if (problems.length > 0) throw new ConfigError(problems);
  return { kids, resolve: createLocalJWKSet(jwks as { keys: JWK[] }) };
}

function publicKeyProblem(key: Record<string, unknown>): string | null {
  if (key.kty !== 'OKP' || key.crv !== 'Ed25519') return 'must be an Ed25519 key (kty "OKP", crv "Ed25519")';
  if (typeof key.x !== 'string' || !BASE64URL_32_BYTES.test(key.x)) return '"x" must be the 32-byte public key in base64url';
  if (typeof key.kid !== 'string' || key.kid.trim() === '') return 'needs a "kid" so tokens can name it';
  if (key.alg !== undefined && key.alg !== OPERATOR_ALGORITHM) return `"alg" must be "${OPERATOR_ALGORITHM}" or absent`;
  if (key.use !== undefined && key.use !== 'sig') return '"use" must be "sig" or absent';
  return null;
}

/** A fresh operator key pair: the private JWK to keep and the public JWKS to configure. */
export async function generateOperatorKeyPair(
  kid?: string,
  now: Date = new Date(),
): Promise<{ privateJwk: JWK; publicJwks: { keys: JWK[] } }> {
  const { privateKey, publicKey } = await generateKeyPair(OPERATOR_ALGORITHM, { crv: 'Ed25519', extractable: true });
  const publicJwk = await exportJWK(publicKey);
  // A dated default makes rotation readable: the JWKS shows which key is the older one.
  const keyId = kid ?? `${now.toISOString().slice(0, 10)}-${(await calculateJwkThumbprint(publicJwk)).slice(0, 8)}`;
  const labels = { kid: keyId, alg: OPERATOR_ALGORITHM, use: 'sig' };
  return {
    privateJwk: { ...(await exportJWK(privateKey)), ...labels },
    publicJwks: { keys: [{ ...publicJwk, ...labels }] },
  };
}

/** Reads a private JWK made by `keys generate`; the message says what is wrong with it. */
export async function importOperatorSigningKey(jwk: unknown): Promise<OperatorSigningKey> {
  if (typeof jwk !== 'object' || jwk === null || Array.isArray(jwk)) throw new Error('the key file must hold one JWK object');
  const candidate = jwk as Record<string, unknown>;
  const problem = publicKeyProblem(candidate);
  if (problem) throw new Error(`the key ${problem}`);
  if (typeof candidate.d !== 'string' || !BASE64URL_32_BYTES.test(candidate.d)) {
    throw new Error('the key file holds no private key ("d"); use the private JWK from `keys generate`');
  }
  const key = await importJWK(candidate as JWK, OPERATOR_ALGORITHM);
  if (key instanceof Uint8Array) throw new Error('the key must be an Ed25519 private key');
  return { kid: candidate.kid as string, key };
}
