import { type AppError, badRequest, forbidden } from '../errors.js';
import type { OperatorPublicKeys } from '../operator-keys/keys.js';
import { type OperatorTokenProblem, verifyOperatorToken } from '../operator-keys/verify.js';

/** The audience of paid-plan grants; an admin token (`omb-broker-admin`) is never one. */
export const GRANT_AUDIENCE = 'omb-connected-apps';

/** A grant whose signature and claims checked out (revocation is checked when it is held). */
export interface VerifiedGrant {
  readonly jti: string;
  /** The Cloud it was issued to. */
  readonly subject: string;
  readonly plan: 'paid';
  readonly issuedAt: Date;
  readonly expiresAt: Date;
}

/** Checks a presented grant at `now`; throws the `AppError` the Cloud will show. */
export type GrantVerifier = (token: string, now: Date) => Promise<VerifiedGrant>;

export function createGrantVerifier(keys: OperatorPublicKeys | null, issuer: string): GrantVerifier {
  return async (token, now) => {
    if (!keys) {
      throw forbidden('this service accepts no paid-plan grants (it has no operator keys configured)', 'grants_not_accepted');
    }
    const result = await verifyOperatorToken(keys, token, {
      audience: GRANT_AUDIENCE,
      issuer,
      requiredClaims: ['plan'],
      now,
    });
    if (!result.ok) throw refusal(result.problem);
    const { claims } = result;
    if (claims.plan !== 'paid') {
      throw forbidden('the grant is for a plan this service does not offer', 'grant_unsupported_plan');
    }
    return {
      jti: claims.jti,
      subject: claims.sub,
      plan: 'paid',
      issuedAt: new Date(claims.iat * 1000),
      expiresAt: new Date(claims.exp * 1000),
    };
  };
}

/** `400` when the grant cannot be read or verified, `403` when it is genuine but not usable here. */
function refusal(problem: OperatorTokenProblem): AppError {
  switch (problem.kind) {
    case 'malformed':
      return badRequest('the grant is not a signed grant token; paste it exactly as it was issued', 'grant_malformed');
    case 'algorithm':
      return badRequest('the grant is not signed with EdDSA (Ed25519), the only signature this service accepts', 'grant_unverifiable');
    case 'no_key_id':
      return badRequest('the grant does not name the operator key (kid) it was signed with', 'grant_unverifiable');
    case 'unknown_key':
      return badRequest('the grant is signed with a key this service does not know', 'grant_unverifiable');
    case 'signature':
      return badRequest('the grant’s signature does not match the operator key it names', 'grant_unverifiable');
    case 'missing_claim':
      return badRequest(`the grant lacks its "${problem.claim}" claim`, 'grant_malformed');
    case 'invalid_claim':
      return badRequest(`the grant’s "${problem.claim}" claim is invalid`, 'grant_malformed');
    case 'expired':
      return forbidden(`the grant expired on ${problem.expiredAt.toISOString()}; ask for a new one`, 'grant_expired');
    case 'not_yet_valid':
      return forbidden('the grant is not valid yet', 'grant_not_yet_valid');
    case 'audience':
      return forbidden('this token is not a connected-apps grant (wrong audience)', 'grant_foreign');
    case 'issuer':
      return forbidden('the grant was issued by someone other than this service’s operators (wrong issuer)', 'grant_foreign');
  }
}
