import { readFileSync } from 'node:fs';

/** A small file of the data folder as text; undefined when it does not exist (any other failure throws). */
export function readIfPresent(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}
