import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { COMMANDS } from '../../src/operators/cli/run.js';
import { runCli } from './support.js';

const cleanups: Array<() => Promise<unknown>> = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

describe('the CLI’s manners', () => {
  it('prints help and exits 0, and 2 with one line for a wrong call', async () => {
    const help = await runCli(['--help']);
    expect(help.code).toBe(0);
    for (const command of ['keys generate', 'grant issue', 'admin-token', 'migrate', 'import']) expect(help.stdout).toContain(command);

    const commandHelp = await runCli(['grant', 'issue', '--help']);
    expect(commandHelp.code).toBe(0);
    expect(commandHelp.stdout).toContain('--days N');

    const unknown = await runCli(['grant', 'issue', '--bogus']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr.trim().split('\n')).toHaveLength(1);
    expect(unknown.stderr).toMatch(/--bogus/);

    const missing = await runCli(['grant', 'issue', '--sub', 'x', '--days', '3']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/--key is required/);

    expect((await runCli(['teleport'])).code).toBe(2);
  });

  it('reads numbers and times as written, refusing what Number() or Date.parse would have guessed', async () => {
    for (const [args, message] of [
      [['installation', 'list', '--limit', '0x10'], /: --limit must be a whole number from 1 to 200 \(see --help\)$/],
      [['installation', 'list', '--limit', '2.5'], /: --limit must be a whole number from 1 to 200 \(see --help\)$/],
      [['installation', 'list', '--limit', ''], /: --limit must be a whole number from 1 to 200 \(see --help\)$/],
      [['installation', 'list', '--seen-before', 'Dec 6'], /: --seen-before must be an ISO 8601 date \(2026-12-01\)/],
      [['grant', 'list', '--limit', '1e1'], /: --limit must be a whole number/],
      [['audit', '--since', '1'], /: --since must be an ISO 8601 date/],
      [['data-keys', 'rotate', '--batch', '1e3'], /: --batch must be a whole number from 1 to 100000 \(see --help\)$/],
      [
        ['grant', 'issue', '--key', 'k.json', '--sub', 'x', '--days', '0x10'],
        /: --days must be a number above 0 and at most \d+, in decimal digits \(see --help\)$/,
      ],
      [['admin-token', '--sub', 'ana', '--minutes', ' '], /: --minutes must be a number above 0/],
    ] as const) {
      const refused = await runCli([...args]);
      expect({ args, code: refused.code }).toEqual({ args, code: 2 });
      expect(refused.stderr.trim()).toMatch(message);
    }
  });

  it('prints each group’s help for `<group> --help`, listing that group’s commands', async () => {
    const groups = new Map<string, string[]>();
    for (const c of COMMANDS) {
      const [group, ...rest] = c.name.split(' ');
      if (rest.length > 0) groups.set(group!, [...(groups.get(group!) ?? []), c.name]);
    }
    expect([...groups.keys()]).toEqual(expect.arrayContaining(['keys', 'grant', 'webhook']));
    for (const [group, names] of groups) {
      const help = await runCli([group, '--help']);
      expect(help.code, `${group} --help`).toBe(0);
      expect(help.stderr).toBe('');
      for (const name of names) expect(help.stdout).toContain(name);
      for (const other of COMMANDS.filter((c) => !names.includes(c.name))) expect(help.stdout).not.toContain(`  ${other.name} `);
      expect((await runCli([group, '-h'])).stdout).toBe(help.stdout);
      // The group alone shows the same list but is a wrong call; a wrong subcommand names the group's help.
      const bare = await runCli([group]);
      expect(bare.code).toBe(2);
      expect(bare.stdout).toBe(help.stdout);
      const wrong = await runCli([group, 'nonsense']);
      expect(wrong.code).toBe(2);
      expect(wrong.stderr).toContain(`${group} --help`);
    }
    expect((await runCli(['keys', '--help'])).stdout).toContain('keys generate');
  });

  it('exits 1 with one line for a missing key file, a public key, or a too-long admin token', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'omb-operator-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    expect((await runCli(['keys', 'generate', '--out', dir])).code).toBe(0);

    const absent = await runCli(['grant', 'issue', '--key', path.join(dir, 'nope.json'), '--sub', 'c', '--days', '1']);
    expect(absent.code).toBe(1);
    expect(absent.stderr).toMatch(/cannot read the key file .*ENOENT/);

    const wrongFile = await runCli(['admin-token', '--key', path.join(dir, 'operator-public.jwks.json'), '--sub', 'ana']);
    expect(wrongFile.code).toBe(1);
    expect(wrongFile.stderr).toMatch(/public JWKS/);

    const tooLong = await runCli(['admin-token', '--key', path.join(dir, 'operator-private.jwk.json'), '--sub', 'ana', '--minutes', '16']);
    expect(tooLong.code).toBe(2);
    expect(tooLong.stderr).toMatch(/at most 15/);

    const again = await runCli(['keys', 'generate', '--out', dir]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/refusing to overwrite/);
  });

  it('refuses to sign a --sub the broker would refuse (too long, control characters, a lone surrogate)', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'omb-operator-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    expect((await runCli(['keys', 'generate', '--out', dir])).code).toBe(0);
    const keyFile = path.join(dir, 'operator-private.jwk.json');
    for (const sub of ['s'.repeat(257), 'ana\u0000root', 'ana\u001b[2J', 'ana\u0085', 'ana\ud800']) {
      for (const command of [['admin-token'], ['grant', 'issue', '--days', '1']]) {
        const refused = await runCli([...command, '--key', keyFile, '--sub', sub]);
        expect(refused.code, JSON.stringify([command, sub])).toBe(2);
        expect(refused.stdout).toBe('');
        expect(refused.stderr).toMatch(/--sub must be well-formed text of at most 256 characters, with no control characters/);
      }
    }
    expect((await runCli(['admin-token', '--key', keyFile, '--sub', `zoë 🐭 ${'s'.repeat(249)}`])).code).toBe(0);
  });

  it('prints a labelled key pair without --out', async () => {
    const printed = await runCli(['keys', 'generate']);
    expect(printed.code).toBe(0);
    expect(printed.stdout).toMatch(/# Private key \(kid [\w.-]+\)\. Keep it secret/);
    expect(printed.stdout).toMatch(/# Public JWKS\. Set it as OPERATOR_PUBLIC_KEYS/);
  });
});

describe('which database the CLI uses', () => {
  it('refuses, naming DATABASE_URL and DATA_DIR, when neither is set and the default folder holds no database; and makes none', async () => {
    // Run from a folder with no .data of its own, as an operator in another directory would.
    const elsewhere = await mkdtemp(path.join(tmpdir(), 'omb-cli-cwd-'));
    cleanups.push(() => rm(elsewhere, { recursive: true, force: true }));
    const cwd = process.cwd();
    process.chdir(elsewhere);
    try {
      for (const command of [['installation', 'list'], ['audit'], ['migrate'], ['grant', 'list']]) {
        const refused = await runCli(command, { USER: 'carl' });
        expect(refused.code, command.join(' ')).toBe(1);
        expect(refused.stdout).toBe('');
        expect(refused.stderr).toMatch(
          /no database named: DATABASE_URL is not set, nor DATA_DIR, and the default data folder .*\.data holds no broker database/,
        );
        expect(refused.stderr.trim().split('\n')).toHaveLength(1);
      }
      expect(await readdir(elsewhere)).toEqual([]);
    } finally {
      process.chdir(cwd);
    }
  });
});

describe('installation show', () => {
  it('takes a full installation id and refuses a prefix, saying that a full id is needed', async () => {
    for (const prefix of ['3f2a', '3f2a…', '3f2a9c1e', '3f2a9c1e-7b4d-4e0a']) {
      const refused = await runCli(['installation', 'show', prefix], { DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' });
      expect(refused.code, prefix).toBe(2);
      expect(refused.stderr).toContain(
        `ID must be a full installation id (36 characters); "${prefix}" looks like a prefix, and prefixes are not looked up`,
      );
    }
    const garbage = await runCli(['installation', 'show', 'nope'], { DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' });
    expect(garbage.code).toBe(2);
    expect(garbage.stderr).toMatch(/ID must be a full installation id \(a UUID/);
    expect((await runCli(['installation', 'show', '--help'])).stdout).toMatch(/full id .*a prefix is refused/s);
  });
});
