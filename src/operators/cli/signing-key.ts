import { readFile, stat } from 'node:fs/promises';
import { importOperatorSigningKey, type OperatorSigningKey } from '../../operator-keys/keys.js';
import { type CliIo, CommandFailed } from './command.js';

/** The operator's private JWK from `--key FILE`, with a warning when others can read the file. */
export async function readSigningKey(file: string, io: CliIo): Promise<OperatorSigningKey> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    throw new CommandFailed(`cannot read the key file ${file}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`);
  }
  let jwk: unknown;
  try {
    jwk = JSON.parse(text);
  } catch {
    throw new CommandFailed(`the key file ${file} is not JSON; use the private JWK from \`keys generate\``);
  }
  if (typeof jwk === 'object' && jwk !== null && 'keys' in jwk) {
    throw new CommandFailed(`${file} is the public JWKS; signing needs the private JWK from \`keys generate\``);
  }
  let signingKey: OperatorSigningKey;
  try {
    signingKey = await importOperatorSigningKey(jwk);
  } catch (error) {
    throw new CommandFailed(`${file}: ${(error as Error).message}`);
  }
  if (process.platform !== 'win32' && ((await stat(file)).mode & 0o077) !== 0) {
    io.err(`warning: ${file} can be read by other users; chmod 600 it\n`);
  }
  return signingKey;
}
