import { createHash, randomBytes } from 'node:crypto';

/** 32 random bytes in lowercase hex: what the existing client accepts (`/^[0-9a-f]{64}$/`). */
export const TOKEN_PATTERN = /^[0-9a-f]{64}$/;

export function newToken(): string {
  return randomBytes(32).toString('hex');
}

/** Only this is stored; the token itself never is. */
export function hashToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

/** The installation's user in the shared Composio project, kept from the first version. */
export function composioUserIdFor(installationId: string): string {
  return `omb_${installationId.replaceAll('-', '')}`;
}
