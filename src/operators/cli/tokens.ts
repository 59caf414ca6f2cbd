import { ClaimText, MAX_CLAIM_LENGTH } from '../../operator-keys/verify.js';
import { MAX_ADMIN_TOKEN_SECONDS } from '../admin-tokens.js';
import { signAdminToken, signGrant } from '../sign.js';
import { type Command, cliConfig, parseOptions, positiveNumber, requireOption, UsageError } from './command.js';
import { readSigningKey } from './signing-key.js';

/** Ten years: a grant is re-issued long before, but a typo of an extra digit is caught. */
const MAX_GRANT_DAYS = 3660;
const MAX_ADMIN_MINUTES = MAX_ADMIN_TOKEN_SECONDS / 60;
const DEFAULT_ADMIN_MINUTES = 10;

function subject(value: string | undefined): string {
  const sub = requireOption(value, '--sub');
  // The broker's own rule for `sub`: the CLI never signs a token the broker would refuse.
  if (!ClaimText.safeParse(sub).success) {
    throw new UsageError(`--sub must be well-formed text of at most ${MAX_CLAIM_LENGTH} characters, with no control characters`);
  }
  return sub;
}

export const grantIssue: Command = {
  name: 'grant issue',
  summary: 'sign a paid-plan grant for a Cloud',
  usage: `Usage: npm run cli -- grant issue --key FILE --sub CLOUD_ID --days N [--issuer I]

  --key FILE      the operator's private JWK (from \`keys generate\`)
  --sub CLOUD_ID  the Cloud the grant is for
  --days N        how long it is valid (at most ${MAX_GRANT_DAYS})
  --issuer I      the "iss" claim (default: OPERATOR_ISSUER, else "openmausbot")

Prints the grant (a compact JWS) on stdout; its jti, which revokes it, goes to stderr.
The Cloud presents it as OMB_CLOUD_CONNECTED_APPS_GRANT.`,

  async run(args, io, env) {
    const { values } = parseOptions(args, {
      key: { type: 'string' },
      sub: { type: 'string' },
      days: { type: 'string' },
      issuer: { type: 'string' },
    });
    const sub = subject(values.sub);
    const days = positiveNumber(requireOption(values.days, '--days'), '--days', MAX_GRANT_DAYS);
    const keyFile = requireOption(values.key, '--key');
    const issuer = values.issuer?.trim() || cliConfig(env).operators.issuer;
    const grant = await signGrant(await readSigningKey(keyFile, io), { subject: sub, issuer, days });
    io.out(`${grant.token}\n`);
    io.err(`grant ${grant.jti} for ${sub}, valid until ${grant.expiresAt.toISOString()}\n`);
    return 0;
  },
};

export const adminToken: Command = {
  name: 'admin-token',
  summary: `sign a short admin token for /v1/admin/… (at most ${MAX_ADMIN_MINUTES} minutes)`,
  usage: `Usage: npm run cli -- admin-token --key FILE --sub OPERATOR [--minutes M] [--issuer I]

  --key FILE      the operator's private JWK (from \`keys generate\`)
  --sub OPERATOR  who you are; written to the broker's log with every admin action
  --minutes M     how long it is valid (default ${DEFAULT_ADMIN_MINUTES}, at most ${MAX_ADMIN_MINUTES})
  --issuer I      the "iss" claim (default: OPERATOR_ISSUER, else "openmausbot")

Prints the token on stdout, e.g.
  curl -H "authorization: Bearer $(npm run -s cli -- admin-token --key k.json --sub ana)" \\
    https://broker.example/v1/admin/stats`,

  async run(args, io, env) {
    const { values } = parseOptions(args, {
      key: { type: 'string' },
      sub: { type: 'string' },
      minutes: { type: 'string' },
      issuer: { type: 'string' },
    });
    const sub = subject(values.sub);
    const minutes = values.minutes === undefined ? DEFAULT_ADMIN_MINUTES : positiveNumber(values.minutes, '--minutes', MAX_ADMIN_MINUTES);
    const keyFile = requireOption(values.key, '--key');
    const issuer = values.issuer?.trim() || cliConfig(env).operators.issuer;
    const token = await signAdminToken(await readSigningKey(keyFile, io), { subject: sub, issuer, minutes });
    io.out(`${token.token}\n`);
    io.err(`admin token for ${sub}, valid until ${token.expiresAt.toISOString()}\n`);
    return 0;
  },
};
