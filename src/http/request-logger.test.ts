import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../logger.js';
import { requestLogger } from './request-logger.js';

/** The broker's logger writing into an array, and how many children were made of it. */
function capture(level = 'info') {
  const lines: Array<Record<string, unknown>> = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n').filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  const logger = createLogger(level, destination);
  let children = 0;
  const child = logger.child;
  // Children inherit this method: `this` is whichever logger the child is made of.
  logger.child = function (this: typeof logger, ...args: Parameters<typeof child>) {
    children++;
    return child.apply(this, args);
  } as typeof logger.child;
  return { logger, lines, children: () => children };
}

const flushed = () => new Promise((resolve) => setImmediate(resolve));

describe('a request’s logger', () => {
  it('writes with the request’s bindings, redacted as the broker’s own lines are', async () => {
    const { logger, lines } = capture();
    const log = requestLogger(logger, { reqId: 'req-7' }, {});
    log.info({ installationId: 'inst-1', headers: { authorization: 'Bearer omb_secret' } }, 'request');
    log.error('plain %s', 'message');
    await flushed();
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatchObject({ reqId: 'req-7', installationId: 'inst-1', msg: 'request', service: 'omb-broker', level: 30 });
    expect(JSON.stringify(lines[0])).not.toContain('omb_secret');
    expect(lines[1]).toMatchObject({ reqId: 'req-7', msg: 'plain message', level: 50 });
  });

  it('makes no child until it writes at an enabled level, then one only', async () => {
    const { logger, lines, children } = capture('info');
    const log = requestLogger(logger, { reqId: 'req-8' }, {});
    log.debug('not written');
    log.trace({ a: 1 }, 'not written');
    expect(children()).toBe(0);
    expect(log.level).toBe('info');
    log.warn('written');
    log.info('written too');
    await flushed();
    expect(children()).toBe(1);
    expect(lines.map((line) => line.msg)).toEqual(['written', 'written too']);
  });

  it('follows a level set on it, and gives route options a child at once', async () => {
    const { logger, lines, children } = capture('info');
    const log = requestLogger(logger, { reqId: 'req-9' }, {});
    log.level = 'debug';
    log.debug('now written');
    expect(requestLogger(logger, { reqId: 'req-10' }, { level: 'warn' }).level).toBe('warn');
    expect(children()).toBe(2);
    const nested = log.child({ step: 'inner' });
    nested.info('nested');
    await flushed();
    expect(lines).toMatchObject([
      { reqId: 'req-9', msg: 'now written' },
      { reqId: 'req-9', step: 'inner', msg: 'nested' },
    ]);
    expect(children()).toBe(3);
    expect(logger.level).toBe('info');
  });
});
