import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { generateOperatorKeyPair } from '../../operator-keys/keys.js';
import { type Command, CommandFailed, parseOptions, UsageError } from './command.js';

const PRIVATE_KEY_FILE = 'operator-private.jwk.json';
const PUBLIC_JWKS_FILE = 'operator-public.jwks.json';

const KID_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;

export const keysGenerate: Command = {
  name: 'keys generate',
  summary: 'make an operator key pair (Ed25519): a private JWK to keep, a public JWKS to configure',
  usage: `Usage: npm run cli -- keys generate [--kid K] [--out DIR]

  --kid K     the key's id, named in every token it signs (default: today's date and a fingerprint)
  --out DIR   write ${PRIVATE_KEY_FILE} (mode 600) and ${PUBLIC_JWKS_FILE} into DIR
              instead of printing the private key

Put the public JWKS in OPERATOR_PUBLIC_KEYS on every broker. To rotate, add the new key to
the "keys" array beside the old one, switch signing to the new key, and drop the old key once
the grants it signed have expired or been reissued.`,

  async run(args, io) {
    const { values } = parseOptions(args, { kid: { type: 'string' }, out: { type: 'string' } });
    if (values.kid !== undefined && !KID_PATTERN.test(values.kid)) {
      throw new UsageError('--kid must be 1–64 letters, digits, dots, dashes or underscores');
    }
    const { privateJwk, publicJwks } = await generateOperatorKeyPair(values.kid);
    const jwks = JSON.stringify(publicJwks);

    if (values.out === undefined) {
      io.out(`# Private key (kid ${privateJwk.kid}). Keep it secret, in a file with mode 600: it signs grants and admin tokens.\n`);
      io.out(`${JSON.stringify(privateJwk, null, 2)}\n\n`);
      io.out('# Public JWKS. Set it as OPERATOR_PUBLIC_KEYS on every broker:\n');
      io.out(`${jwks}\n`);
      return 0;
    }

    const privatePath = path.join(values.out, PRIVATE_KEY_FILE);
    const publicPath = path.join(values.out, PUBLIC_JWKS_FILE);
    await mkdir(values.out, { recursive: true, mode: 0o700 });
    try {
      // `wx`: an existing private key is somebody's signing key; it is never overwritten.
      await writeFile(privatePath, `${JSON.stringify(privateJwk, null, 2)}\n`, { flag: 'wx', mode: 0o600 });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EEXIST')
        throw new CommandFailed(`${privatePath} already exists; refusing to overwrite a private key`);
      throw error;
    }
    await writeFile(publicPath, `${jwks}\n`, { mode: 0o644 });
    io.out(
      `# Private key (kid ${privateJwk.kid}) written to ${privatePath} (mode 600). Keep it secret: it signs grants and admin tokens.\n`,
    );
    io.out(`# Public JWKS written to ${publicPath}. Set it as OPERATOR_PUBLIC_KEYS on every broker:\n`);
    io.out(`${jwks}\n`);
    return 0;
  },
};
