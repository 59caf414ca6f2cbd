import { decodeProtectedHeader, errors, type JWTPayload, jwtVerify } from 'jose';
import { z } from 'zod';
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

interface OperatorClaims extends JWTPayload {
  sub: string;
  jti: string;
  iss: string;
  aud: string;
  iat: number;
  exp: number;
}

export type OperatorTokenResult = { ok: true; claims: OperatorClaims } | { ok: false; problem: OperatorTokenProblem };

/** The last second of year 9999: a date claim past it is not a date anything here can store. */
const MAX_NUMERIC_DATE = 253_402_300_799;

/**
 * The longest text claim (`sub`, `jti`, `iss`) accepted. Names and ids are far shorter; the bound
 * keeps what is stored, audited and logged for a token small. The CLI signs no longer `--sub`.
 */
export const MAX_CLAIM_LENGTH = 256;

/** C0 and C1 control characters, DEL among them: no name or id has one, and Postgres cannot store NUL. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f-\u009f]/;

/**
 * Half of a UTF-16 surrogate pair without the other half: no UTF-8 text holds it, so Postgres
 * would store U+FFFD instead and the stored id would not be the signed one. (Node 20 has no
 * `String.prototype.isWellFormed`.)
 */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * A claim that names something (`sub`, `jti`, `iss`): text that every column, audit row and log
 * line can hold exactly as it was signed. The one rule for admin tokens and grants, and for what
 * the operators' CLI agrees to sign.
 */
export const ClaimText = z
  .string()
  .max(MAX_CLAIM_LENGTH)
  .refine((value) => value.trim() !== '' && !CONTROL_CHARACTER.test(value) && !LONE_SURROGATE.test(value));

/** Seconds since 1970 that are dates the broker can show and store: no negative or enormous ones. */
const NumericDate = z.number().min(0).max(MAX_NUMERIC_DATE);

/**
 * The claims every operator-signed token carries, once its signature, audience and issuer have
 * checked out. `aud` must be one string (jose has matched it, so exactly the expected one): jose
 * also accepts an array naming the audience among others, which would make one token both an
 * admin token and a grant. Other claims (a grant's `plan`) pass through.
 */
const VerifiedClaims = z.looseObject({
  iat: NumericDate,
  exp: NumericDate,
  sub: ClaimText,
  jti: ClaimText,
  iss: ClaimText,
  aud: z.string(),
});

/** The claims every token must have, besides those the caller requires. */
const REQUIRED_CLAIMS = ['sub', 'jti', 'iat', 'exp'] as const;

/**
 * Checks a compact JWS against the operators' public keys: EdDSA only, `kid` required and
 * configured, signature, then `aud`, `iss`, `iat`, `exp` (against `now`, so tests can move time),
 * `sub`, `jti` and any other required claims, each of the shape `VerifiedClaims` says. The
 * algorithm and key are settled from the header before `jose` runs, so `none`, HMAC keyed with
 * a public key, or an RSA/EC signature under a known `kid` never reach a verifier.
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
  for (const claim of [...REQUIRED_CLAIMS, ...expected.requiredClaims]) {
    if (!Object.hasOwn(payload, claim)) return refuse({ kind: 'missing_claim', claim });
  }
  const parsed = VerifiedClaims.safeParse(payload);
  if (!parsed.success) return refuse({ kind: 'invalid_claim', claim: String(parsed.error.issues[0]?.path[0] ?? 'payload') });
  const claims = parsed.data as OperatorClaims;

  const nowSeconds = Math.floor(expected.now.getTime() / 1000);
  // The tolerance is for a token that is early, never for one that is late: the broker's clock
  // alone decides when a plan ends, so a grant it accepts now is one it still counts now.
  if (claims.exp <= nowSeconds) return refuse({ kind: 'expired', expiredAt: new Date(claims.exp * 1000) });
  // jose checks `iat` only against a maximum age; a token "issued" in the future is not valid yet.
  if (claims.iat > nowSeconds + CLOCK_TOLERANCE_SECONDS) return refuse({ kind: 'not_yet_valid' });
  return { ok: true, claims };
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
