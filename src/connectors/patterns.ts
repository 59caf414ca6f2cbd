import { z } from 'zod';

/** The ids a client may send, as the first version accepted them (existing-client.md). */
export const ToolkitSlug = z.string().regex(/^[a-z0-9][a-z0-9_-]{0,80}$/, 'must be a toolkit slug such as gmail');
export const ConnectedAccountId = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/, 'must be a connected account id such as ca_…');

/** A label for an account: 1–64 printable characters once trimmed; compared case-insensitively. */
export const Alias = z
  .string()
  .transform((s) => s.trim())
  .pipe(
    z
      .string()
      .min(1, 'must not be empty')
      .max(64, 'must be at most 64 characters')
      .regex(/^[^\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}]+$/u, 'must be printable characters'),
  );

/** The label an alias-less retry gets while the app's accounts exist but none works. */
export const RETRY_LABEL_PREFIX = 'omb-retry-';

/** A label the person chose (not none, not one the broker made up for a retry). */
export const isOwnLabel = (alias: string | null | undefined): alias is string =>
  typeof alias === 'string' && alias.trim() !== '' && !alias.startsWith(RETRY_LABEL_PREFIX);

export const sameAlias = (a: string | null | undefined, b: string): boolean =>
  typeof a === 'string' && a.trim().toLowerCase() === b.toLowerCase();
