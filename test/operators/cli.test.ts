import { mkdtemp, rm } from 'node:fs/promises';
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

  it('prints a labelled key pair without --out', async () => {
    const printed = await runCli(['keys', 'generate']);
    expect(printed.code).toBe(0);
    expect(printed.stdout).toMatch(/# Private key \(kid [\w.-]+\)\. Keep it secret/);
    expect(printed.stdout).toMatch(/# Public JWKS\. Set it as OPERATOR_PUBLIC_KEYS/);
  });
});
