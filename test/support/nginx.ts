import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** The balancer's configuration as shipped in docker/ (a conf.d server block). */
export const SHIPPED_NGINX_CONF = path.join(ROOT, 'docker/nginx.conf');

/**
 * Debian's nginx (`apt-get install nginx`, done by `.ci/run`), for the `system` project's tests
 * only (`*.system.test.ts`). Never skipped: without it those tests fail and say how to get it.
 */
function nginxBinary(): string {
  const found = ['/usr/sbin/nginx', '/usr/bin/nginx', '/usr/local/sbin/nginx'].find((candidate) => existsSync(candidate));
  if (!found) throw new Error("nginx is not installed: `apt-get install nginx` (Debian's package; .ci/run installs it)");
  return found;
}

/**
 * docker/nginx.conf made runnable outside Docker: the `broker` name resolves to `upstream`
 * (host:port), the server listens on `listen`, and Docker's DNS becomes loopback. Everything
 * else — the headers, timeouts, the /metrics refusal — is the shipped text.
 */
export async function renderShippedConf(options: { upstream: string; listen: string }): Promise<string> {
  const shipped = await readFile(SHIPPED_NGINX_CONF, 'utf8');
  const rendered = shipped
    .replace(/\bbroker:8787\b/g, options.upstream)
    .replace(/^(\s*)listen 80;/m, `$1listen ${options.listen};`)
    .replace(/\bresolver 127\.0\.0\.11\b/, 'resolver 127.0.0.1');
  if (!rendered.includes(options.upstream) || !rendered.includes(`listen ${options.listen};`)) {
    throw new Error('docker/nginx.conf no longer has the `broker:8787` upstream or `listen 80;` these tests substitute');
  }
  return rendered;
}

/** A main nginx.conf around one server block, with every path in `dir`. */
function mainConf(dir: string, serverConf: string): string {
  return `worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  include ${serverConf};
}
`;
}

async function prepare(serverBlock: string): Promise<{ dir: string; conf: string }> {
  const dir = await mkdtemp(path.join(tmpdir(), 'omb-nginx-'));
  // Run as root, nginx's workers switch to an unprivileged user that must reach the temp paths.
  await chmod(dir, 0o755);
  await writeFile(path.join(dir, 'server.conf'), serverBlock);
  const conf = path.join(dir, 'nginx.conf');
  await writeFile(conf, mainConf(dir, path.join(dir, 'server.conf')));
  return { dir, conf };
}

/** `nginx -t` on a server block: resolves with nginx's verdict (exit code and what it printed). */
export async function nginxTest(serverBlock: string): Promise<{ ok: boolean; output: string }> {
  // Outside the try: a missing nginx fails with its own message, not as a verdict on the config.
  const nginx = nginxBinary();
  const { dir, conf } = await prepare(serverBlock);
  try {
    const { stdout, stderr } = await promisify(execFile)(nginx, ['-t', '-p', dir, '-c', conf]);
    return { ok: true, output: stdout + stderr };
  } catch (error) {
    const e = error as { stdout?: string; stderr?: string };
    return { ok: false, output: `${e.stdout ?? ''}${e.stderr ?? ''}` };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

export interface RunningNginx {
  readonly url: string;
  stop(): Promise<void>;
}

/** nginx in the foreground with this server block, listening on `port` (loopback). */
export async function startNginx(serverBlock: string, port: number): Promise<RunningNginx> {
  const { dir, conf } = await prepare(serverBlock);
  const child: ChildProcess = spawn(nginxBinary(), ['-p', dir, '-c', conf, '-g', 'daemon off;'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = `http://127.0.0.1:${port}`;

  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGQUIT');
    await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 5_000))]);
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await rm(dir, { recursive: true, force: true });
  };

  const deadline = Date.now() + 15_000;
  for (;;) {
    if (child.exitCode !== null) {
      const log = await readFile(path.join(dir, 'error.log'), 'utf8').catch(() => '');
      await stop();
      throw new Error(`nginx exited at start:\n${output}\n${log}`);
    }
    const up = await fetch(`${url}/health`).then(
      () => true,
      () => false,
    );
    if (up) return { url, stop };
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`nginx did not listen on ${url}:\n${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
