import { randomUUID } from 'node:crypto';
import { SignJWT } from 'jose';
import { OPERATOR_ALGORITHM, type OperatorSigningKey } from '../operator-keys/keys.js';
import { GRANT_AUDIENCE } from '../plans/grants.js';
import { ADMIN_AUDIENCE, MAX_ADMIN_TOKEN_SECONDS } from './admin-tokens.js';

/** What the operators sign; the broker verifies the same shapes in `plans/` and `admin-tokens.ts`. */
export interface SignedToken {
  readonly token: string;
  readonly jti: string;
  readonly expiresAt: Date;
}

const seconds = (at: Date) => Math.floor(at.getTime() / 1000);

async function sign(
  signer: OperatorSigningKey,
  claims: { audience: string; issuer: string; subject: string; lifetimeSeconds: number; now: Date; extra?: Record<string, unknown> },
): Promise<SignedToken> {
  const jti = randomUUID();
  const issuedAt = seconds(claims.now);
  const expiresAt = issuedAt + claims.lifetimeSeconds;
  const token = await new SignJWT(claims.extra ?? {})
    .setProtectedHeader({ alg: OPERATOR_ALGORITHM, kid: signer.kid, typ: 'JWT' })
    .setIssuer(claims.issuer)
    .setAudience(claims.audience)
    .setSubject(claims.subject)
    .setIssuedAt(issuedAt)
    .setExpirationTime(expiresAt)
    .setJti(jti)
    .sign(signer.key);
  return { token, jti, expiresAt: new Date(expiresAt * 1000) };
}

/** A paid-plan grant for one Cloud (`sub`), valid for `days`. */
export function signGrant(
  signer: OperatorSigningKey,
  options: { subject: string; issuer: string; days: number; now?: Date },
): Promise<SignedToken> {
  return sign(signer, {
    audience: GRANT_AUDIENCE,
    issuer: options.issuer,
    subject: options.subject,
    lifetimeSeconds: Math.round(options.days * 86_400),
    now: options.now ?? new Date(),
    extra: { plan: 'paid' },
  });
}

/** A short admin token for operator `sub`; the broker refuses any that lives longer than 15 minutes. */
export function signAdminToken(
  signer: OperatorSigningKey,
  options: { subject: string; issuer: string; minutes: number; now?: Date },
): Promise<SignedToken> {
  const lifetimeSeconds = Math.round(options.minutes * 60);
  if (lifetimeSeconds <= 0 || lifetimeSeconds > MAX_ADMIN_TOKEN_SECONDS) {
    throw new RangeError(`an admin token lives from 1 second to ${MAX_ADMIN_TOKEN_SECONDS / 60} minutes`);
  }
  return sign(signer, {
    audience: ADMIN_AUDIENCE,
    issuer: options.issuer,
    subject: options.subject,
    lifetimeSeconds,
    now: options.now ?? new Date(),
  });
}
