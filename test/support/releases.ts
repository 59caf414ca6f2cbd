import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository's root. */
export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export interface Release {
  readonly version: string;
  /** The full commit it was cut from; `undefined` for the release being prepared. */
  readonly commit: string | undefined;
}

/** The releases `CHANGELOG.md` lists, newest first: a `## <version> — <date>` heading each, and a `Commit:` line. */
async function releases(): Promise<Release[]> {
  const text = await readFile(path.join(REPO_ROOT, 'CHANGELOG.md'), 'utf8');
  const sections = text.split(/^## /m).slice(1);
  return sections.map((section) => {
    const version = /^(\d+\.\d+\.\d+)/.exec(section)?.[1];
    if (!version) throw new Error(`CHANGELOG.md: a section heading without a version: ## ${section.split('\n')[0]}`);
    const commit = /^Commit: `([0-9a-f]{40})`/m.exec(section)?.[1];
    return { version, commit };
  });
}

/** The newest release with a commit: the one `HEAD` must roll from. */
export async function previousRelease(): Promise<Release & { commit: string }> {
  const found = (await releases()).find((release): release is Release & { commit: string } => release.commit !== undefined);
  if (!found) throw new Error('CHANGELOG.md names no released commit');
  return found;
}
