import type { Readable, Writable } from 'node:stream';

/**
 * Just enough of the POSIX tar format (ustar) for a backup of the data folder: regular files and
 * folders, each with its permission bits, in 512-byte blocks. Any `tar` reads what this writes
 * (`tar -tzvf backup.tar.gz`); the reader takes back only what this writes, and refuses the rest.
 */

const BLOCK = 512;

export interface TarEntry {
  /** `/`-separated, relative, without `.` or `..` parts. */
  readonly path: string;
  readonly type: 'file' | 'folder';
  readonly mode: number;
  readonly size: number;
}

/** A header's text field: the value, then NULs to its width; refused if it does not fit. */
function field(block: Buffer, offset: number, width: number, value: string): void {
  const bytes = Buffer.from(value, 'utf8');
  if (bytes.length > width) throw new Error(`tar: "${value}" does not fit in ${width} bytes`);
  bytes.copy(block, offset);
}

function octal(block: Buffer, offset: number, width: number, value: number): void {
  field(block, offset, width, `${value.toString(8).padStart(width - 1, '0')}\0`);
}

/** The name split into ustar's prefix (155 bytes) and name (100 bytes) at a `/`. */
function splitName(name: string): [prefix: string, rest: string] {
  if (Buffer.byteLength(name) <= 100) return ['', name];
  for (let at = name.indexOf('/'); at !== -1; at = name.indexOf('/', at + 1)) {
    const prefix = name.slice(0, at);
    const rest = name.slice(at + 1);
    if (Buffer.byteLength(prefix) <= 155 && Buffer.byteLength(rest) <= 100) return [prefix, rest];
  }
  throw new Error(`tar: the path ${name} is too long`);
}

export function header(entry: TarEntry, mtime: Date): Buffer {
  const block = Buffer.alloc(BLOCK);
  const [prefix, name] = splitName(entry.type === 'folder' ? `${entry.path}/` : entry.path);
  field(block, 0, 100, name);
  octal(block, 100, 8, entry.mode & 0o7777);
  octal(block, 108, 8, 0);
  octal(block, 116, 8, 0);
  octal(block, 124, 12, entry.type === 'folder' ? 0 : entry.size);
  octal(block, 136, 12, Math.floor(mtime.getTime() / 1000));
  block.fill(' ', 148, 156);
  field(block, 156, 1, entry.type === 'folder' ? '5' : '0');
  field(block, 257, 6, 'ustar\0');
  field(block, 263, 2, '00');
  field(block, 345, 155, prefix);
  let sum = 0;
  for (const byte of block) sum += byte;
  field(block, 148, 8, `${sum.toString(8).padStart(6, '0')}\0 `);
  return block;
}

/** Zeros after a file's content, to the end of its last block. */
export function padding(size: number): Buffer {
  return Buffer.alloc((BLOCK - (size % BLOCK)) % BLOCK);
}

/** The end of an archive: two blocks of zeros. */
export const END = Buffer.alloc(2 * BLOCK);

/**
 * Writes to `out`, waiting while it is full. Rejects once `out` has failed or closed, before or
 * while waiting: a destroyed stream takes no more writes and never drains, so waiting for its
 * `drain` would wait for ever (a backup whose file could not be opened, or whose disk filled up).
 */
export async function writeTo(out: Writable, chunk: Buffer): Promise<void> {
  if (out.destroyed) throw closedEarly(out);
  if (out.write(chunk)) return;
  await new Promise<void>((resolve, reject) => {
    const settle = (error?: Error) => {
      out.off('drain', drained);
      out.off('error', settle);
      out.off('close', closed);
      if (error) reject(error);
      else resolve();
    };
    const drained = () => settle();
    const closed = () => settle(closedEarly(out));
    out.on('drain', drained);
    out.on('error', settle);
    out.on('close', closed);
  });
}

function closedEarly(out: Writable): Error {
  return out.errored ?? new Error('the output closed before everything was written');
}

function text(block: Buffer, offset: number, width: number): string {
  const raw = block.subarray(offset, offset + width);
  const end = raw.indexOf(0);
  return raw.subarray(0, end === -1 ? width : end).toString('utf8');
}

function number(block: Buffer, offset: number, width: number): number {
  const value = text(block, offset, width).trim();
  if (!/^[0-7]+$/.test(value)) throw new Error('not a tar archive this broker wrote (a header field is not a number)');
  return Number.parseInt(value, 8);
}

/** A safe relative path: no absolute path, no `..`, nothing empty. */
function safePath(name: string): string {
  const trimmed = name.replace(/\/+$/, '');
  const parts = trimmed.split('/');
  if (trimmed === '' || name.startsWith('/') || parts.some((part) => part === '' || part === '.' || part === '..' || part.includes('\0'))) {
    throw new Error(`the archive holds a path that is not a plain relative one: ${JSON.stringify(name)}`);
  }
  return trimmed;
}

/**
 * The entries of an archive this module wrote, in order, each with its content (folders: empty).
 * A header that does not check out, an entry of another kind, or an archive that ends before its
 * end blocks is refused.
 */
export async function* readTar(input: Readable): AsyncGenerator<{ entry: TarEntry; content: AsyncGenerator<Buffer> }> {
  let buffered: Buffer = Buffer.alloc(0);
  const chunks = input[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  async function fill(bytes: number): Promise<boolean> {
    while (buffered.length < bytes) {
      const next = await chunks.next();
      if (next.done) return false;
      buffered = buffered.length === 0 ? next.value : Buffer.concat([buffered, next.value]);
    }
    return true;
  }
  for (;;) {
    if (!(await fill(BLOCK))) throw new Error('the archive ends early: it is incomplete');
    const block = buffered.subarray(0, BLOCK);
    buffered = buffered.subarray(BLOCK);
    if (block.every((byte) => byte === 0)) return;
    if (text(block, 257, 6) !== 'ustar') throw new Error('not a tar archive this broker wrote');
    const expected = number(block, 148, 8);
    let sum = 0;
    for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 32 : block[i]!;
    if (sum !== expected) throw new Error('the archive is damaged (a header checksum does not match)');
    const typeflag = text(block, 156, 1);
    if (typeflag !== '0' && typeflag !== '5')
      throw new Error(`the archive holds an entry of a kind this broker never writes (${JSON.stringify(typeflag)})`);
    const prefix = text(block, 345, 155);
    const name = text(block, 0, 100);
    const entry: TarEntry = {
      path: safePath(prefix ? `${prefix}/${name}` : name),
      type: typeflag === '5' ? 'folder' : 'file',
      mode: number(block, 100, 8),
      size: typeflag === '5' ? 0 : number(block, 124, 12),
    };
    let left = entry.size;
    async function* content(): AsyncGenerator<Buffer> {
      while (left > 0) {
        if (buffered.length === 0 && !(await fill(1))) throw new Error('the archive ends early: it is incomplete');
        const take = buffered.subarray(0, Math.min(left, buffered.length));
        buffered = buffered.subarray(take.length);
        left -= take.length;
        yield take;
      }
    }
    yield { entry, content: content() };
    // Whatever the reader left of the content, then the padding.
    for await (const _ of content()) {
      // drained
    }
    const pad = padding(entry.size).length;
    if (!(await fill(pad))) throw new Error('the archive ends early: it is incomplete');
    buffered = buffered.subarray(pad);
  }
}
