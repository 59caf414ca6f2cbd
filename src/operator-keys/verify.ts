import { decodeProtectedHeader, errors, type JWTPayload, jwtVerify } from 'jose';
import { OPERATOR_ALGORITHM, type OperatorPublicKeys } from './keys.js';

/** Clocks of the operator's machine and the broker's may disagree by this much. */
const CLOCK_TOLERANCE_SECONDS = 30;

/** Why a token signed (or claiming to be signed) by an operator key was refused. */
export type OperatorTokenProblem =
  | { kind: 'malformed' }
  | { kind: 'algorithm' }
  | { kind: 'no_key_id' }
  | { kind: 'unknown_key' }
  | { kind: 'signature' }
  | { kind: 'missing_claim'; claim: string }
  | { kind: 'invalid_claim'; claim: string }
  | { kind: 'expired'; expiredAt: Date }
  | { kind: 'not_yet_valid' }
  | { kind: 'audience' }
  | { kind: 'issuer' };

export interface OperatorClaims extends JWTPayload {
  sub: string;
  iat: number;
  exp: number;
}

export type OperatorTokenResult = { ok: true; claims: OperatorClaims } | { ok: false; problem: OperatorTokenProblem };

/** The last second of year 9999: a date claim past it is not a date anything here can store. */
const MAX_NUMERIC_DATE = 253_402_300_799;

/** A claim that names something (`sub`, `jti`) must be a short non-empty string. */
const MAX_NAME_LENGTH = 256;

/**
 * Checks a compact JWS against the operators' public keys: EdDSA only, `kid` required and
 * configured, signature, then `aud`, `iss`, `iat`, `exp` (against `now`, so tests can move time),
 * a string `sub` and any other required claims. The algorithm and key are settled from the
 * header before `jose` runs, so `none`, HMAC keyed with a public key, or an RSA/EC signature
 * under a known `kid` never reach a verifier.
 */
export async function verifyOperatorToken(
  keys: OperatorPublicKeys,
  token: string,
  expected: { audience: string; issuer: string; requiredClaims: readonly string[]; now: Date },
): Promise<OperatorTokenResult> {
  const refuse = (problem: OperatorTokenProblem): OperatorTokenResult => ({ ok: false, problem });

  let header: ReturnType<typeof decodeProtectedHeader>;
  try {
    if (token.split('.').length !== 3) return refuse({ kind: 'malformed' });
    header = decodeProtectedHeader(token);
  } catch {
    return refuse({ kind: 'malformed' });
  }
  if (header.alg !== OPERATOR_ALGORITHM) return refuse({ kind: 'algorithm' });
  if (typeof header.kid !== 'string' || header.kid === '') return refuse({ kind: 'no_key_id' });
  if (!keys.kids.has(header.kid)) return refuse({ kind: 'unknown_key' });

  let payload: JWTPayload;
  try {
    ({ payload } = await jwtVerify(token, keys.resolve, {
      algorithms: [OPERATOR_ALGORITHM],
      audience: expected.audience,
      issuer: expected.issuer,
      currentDate: expected.now,
      clockTolerance: CLOCK_TOLERANCE_SECONDS,
    }));
  } catch (error) {
    return refuse(problemFrom(error));
  }
  // Presence is checked here rather than by jose, after the audience: a genuine token meant for
  // something else (an admin token presented as a grant) is "foreign", not "incomplete".
  for (const claim of ['sub', 'iat', 'exp', ...expected.requiredClaims]) {
    if (!Object.hasOwn(payload, claim)) return refuse({ kind: 'missing_claim', claim });
  }

  // Seconds since 1970 that are dates the broker can show and store: no negative or enormous ones.
  for (const claim of ['iat', 'exp'] as const) {
    const value = payload[claim];
    if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || value > MAX_NUMERIC_DATE) {
      return refuse({ kind: 'invalid_claim', claim });
    }
  }

  const nowSeconds = Math.floor(expected.now.getTime() / 1000);
  // The tolerance is for a token that is early, never for one that is late: the broker's clock
  // alone decides when a plan ends, so a grant it accepts now is one it still counts now.
  if ((payload.exp as number) <= nowSeconds) return refuse({ kind: 'expired', expiredAt: new Date((payload.exp as number) * 1000) });
  // jose checks `iat` only against a maximum age; a token "issued" in the future is not valid yet.
  if ((payload.iat as number) > nowSeconds + CLOCK_TOLERANCE_SECONDS) return refuse({ kind: 'not_yet_valid' });
  const names = expected.requiredClaims.includes('jti') ? ['sub', 'jti'] : ['sub'];
  for (const claim of names) {
    const value = payload[claim];
    if (typeof value !== 'string' || value.trim() === '' || value.length > MAX_NAME_LENGTH) {
      return refuse({ kind: 'invalid_claim', claim });
    }
  }
  return { ok: true, claims: payload as OperatorClaims };
}

function problemFrom(error: unknown): OperatorTokenProblem {
  if (error instanceof errors.JWTExpired) {
    const exp = error.payload.exp;
    return { kind: 'expired', expiredAt: new Date((typeof exp === 'number' ? exp : 0) * 1000) };
  }
  if (error instanceof errors.JWTClaimValidationFailed) {
    if (error.claim === 'aud') return { kind: 'audience' };
    if (error.claim === 'iss') return { kind: 'issuer' };
    if (error.claim === 'nbf') return { kind: 'not_yet_valid' };
    if (error.reason === 'missing') return { kind: 'missing_claim', claim: error.claim };
    return { kind: 'invalid_claim', claim: error.claim };
  }
  if (error instanceof errors.JWSSignatureVerificationFailed) return { kind: 'signature' };
  if (error instanceof errors.JOSEAlgNotAllowed) return { kind: 'algorithm' };
  if (error instanceof errors.JWKSNoMatchingKey) return { kind: 'unknown_key' };
  if (error instanceof errors.JOSEError) return { kind: 'malformed' };
  throw error;
}
