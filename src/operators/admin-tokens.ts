import { AppError } from '../errors.js';
import type { OperatorPublicKeys } from '../operator-keys/keys.js';
import { type OperatorTokenProblem, verifyOperatorToken } from '../operator-keys/verify.js';

/** The audience of admin tokens; a grant (`omb-connected-apps`) is never one. */
export const ADMIN_AUDIENCE = 'omb-broker-admin';

/** An admin token is meant for one sitting at a terminal, not for a script to keep. */
export const MAX_ADMIN_TOKEN_SECONDS = 15 * 60;

/** The operator an admin token names (`sub`), for the logs. */
export interface Operator {
  readonly subject: string;
  /** The token's `jti` (every admin token has one), for the audit trail. */
  readonly tokenId: string;
}

const refused = (message: string) => new AppError(401, 'operator_unauthorized', message);

/**
 * The operator behind `authorization: Bearer <admin token>`. Every refusal is `401`; the sentence
 * says why, which helps the operator and tells an attacker nothing the signature did not.
 */
export async function authenticateOperator(
  keys: OperatorPublicKeys | null,
  token: string | null,
  issuer: string,
  now: Date,
): Promise<Operator> {
  if (!keys) {
    throw new AppError(403, 'admin_disabled', 'the admin API is off: this broker has no operator keys (OPERATOR_PUBLIC_KEYS)');
  }
  if (token === null) throw refused('missing operator token; send authorization: Bearer <admin token>');
  const result = await verifyOperatorToken(keys, token, { audience: ADMIN_AUDIENCE, issuer, requiredClaims: [], now });
  if (!result.ok) throw refused(describe(result.problem));
  const { iat, exp, sub, jti } = result.claims;
  if (exp - iat > MAX_ADMIN_TOKEN_SECONDS) {
    throw refused(`the operator token lives longer than ${MAX_ADMIN_TOKEN_SECONDS / 60} minutes; mint a shorter one`);
  }
  return { subject: sub, tokenId: jti };
}

function describe(problem: OperatorTokenProblem): string {
  switch (problem.kind) {
    case 'expired':
      return 'the operator token has expired; mint a new one';
    case 'not_yet_valid':
      return 'the operator token is not valid yet; check the clock of the machine that minted it';
    case 'audience':
      return 'this token is not an admin token (wrong audience)';
    case 'issuer':
      return 'the operator token was issued for another service (wrong issuer)';
    case 'unknown_key':
    case 'no_key_id':
      return 'the operator token is signed with a key this broker does not know';
    // The claim is named: a token the CLI did not make (or an old one) says what to fix.
    case 'missing_claim':
      return `invalid operator token: it lacks its "${problem.claim}" claim`;
    case 'invalid_claim':
      return `invalid operator token: its "${problem.claim}" claim is invalid`;
    default:
      return 'invalid operator token';
  }
}
