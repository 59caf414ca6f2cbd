import { Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { writeTo } from './tar.js';

/** `promise`, or a rejection saying it never settled: a write that waits for ever must fail the test, not hang it. */
function within<T>(promise: Promise<T>, ms = 2000): Promise<T> {
  return Promise.race([promise, sleep(ms).then(() => Promise.reject(new Error(`still waiting after ${ms} ms`)))]);
}

/** A stream that takes `room` bytes into its buffer and then writes nothing more until told. */
function slowStream(room: number): { stream: Writable; fail(error: Error): void } {
  let pending: ((error?: Error | null) => void) | undefined;
  const stream = new Writable({
    highWaterMark: room,
    write(_chunk, _encoding, callback) {
      pending = callback;
    },
  });
  return { stream, fail: (error) => pending?.(error) };
}

describe('writeTo', () => {
  it('rejects with the output’s own error when the output has already failed (a backup file that could not be opened)', async () => {
    const { stream, fail } = slowStream(4);
    stream.on('error', () => {});
    stream.write(Buffer.alloc(8));
    fail(new Error('ENOENT: no such file or directory'));
    await sleep(0);
    expect(stream.destroyed).toBe(true);
    await expect(within(writeTo(stream, Buffer.alloc(8)))).rejects.toThrow('ENOENT: no such file or directory');
  });

  it('rejects when the output fails while it waits for room (a disk that fills up)', async () => {
    const { stream, fail } = slowStream(4);
    stream.on('error', () => {});
    const waiting = within(writeTo(stream, Buffer.alloc(8)));
    await sleep(10);
    fail(new Error('ENOSPC: no space left on device'));
    await expect(waiting).rejects.toThrow('ENOSPC: no space left on device');
  });

  it('rejects when the output is closed while it waits, and resolves once there is room', async () => {
    const closed = slowStream(4);
    const waiting = within(writeTo(closed.stream, Buffer.alloc(8)));
    await sleep(10);
    closed.stream.destroy();
    await expect(waiting).rejects.toThrow('the output closed before everything was written');

    const chunks: Buffer[] = [];
    const open = new Writable({
      highWaterMark: 4,
      write(chunk: Buffer, _encoding, callback) {
        chunks.push(chunk);
        setTimeout(callback, 5);
      },
    });
    await within(writeTo(open, Buffer.from('12345678')));
    await within(writeTo(open, Buffer.from('9')));
    expect(Buffer.concat(chunks).toString()).toBe('123456789');
  });
});
