import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, openSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { chown, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import postgres from 'postgres';
import { stringify } from 'yaml';
import { freePort } from '../../src/db/embedded.js';
import { dataFolderParent } from './data-folder.js';
import { PG_BIN, runAsUser } from './debian-postgres.js';

/**
 * A two-node Patroni cluster over a one-member etcd, for the `system` project's tests
 * (`*.system.test.ts`): Postgres 15 as a high-availability service runs it, a leader streaming to
 * a replica, with the leader's failure or a switchover moving the writes to the other node. The
 * broker is given `url()`, which names both nodes and lets the client find the primary
 * (`target_session_attrs=primary`), as a client of such a service does.
 *
 * The timings are short (a leader key living `ttl` = 10 s, Patroni looking every second) so that a
 * failover takes seconds, not the half-minute of Patroni's defaults. With `synchronous`, a commit
 * is answered only once the replica has it (Patroni's `synchronous_mode`), so a leader killed
 * with `kill -9` loses nothing that was answered; without it the replica may lag, and what it
 * lacks is lost with the killed leader.
 *
 * Everything the cluster runs is its own: its processes are stopped by their ids (never by name:
 * other Postgres servers may run on the machine) and its folder is removed by `stop()`.
 */
export interface PatroniCluster {
  /** The members' names, as Patroni and `pg_stat_replication` know them. */
  readonly names: readonly [string, string];
  /** Both nodes, for a client to find the primary among them: `postgres://…@127.0.0.1:p1,127.0.0.1:p2/<database>?target_session_attrs=primary`. */
  url(database?: string): string;
  /** One node alone, whatever its role now (a replica's data, or a leader's before a failover). */
  nodeUrl(name: string, database?: string): string;
  /** The current leader alone, as the superuser (for `create database` and the test's own checks). */
  leaderUrl(database?: string): Promise<string>;
  /**
   * `create database` on the leader, resolving with `url(name)` once the replica has it too:
   * a client of `url()` may try the replica first, and postgres.js fails the connection
   * (3D000) on a replica that has not replayed the creation yet rather than trying the next host.
   */
  createDatabase(name: string): Promise<string>;
  /** The current leader's name per Patroni's REST API, once there is one. */
  leader(): Promise<string>;
  /** Resolves once a leader accepts writes and the other node streams from it (in sync, when `synchronous`). */
  replicating(): Promise<void>;
  /**
   * `patronictl switchover --force` to the other node, once it streams (`replicating()`); resolves
   * once the new leader accepts writes, with the milliseconds from patronictl's start until then.
   */
  switchover(): Promise<{ from: string; to: string; ms: number }>;
  /**
   * The leader's machine dies: `kill -9` of its Patroni and of its Postgres (the postmaster and
   * every backend and helper it started). Resolves once the other node leads and accepts writes,
   * with the milliseconds from the kill until then. Unless `rejoin` is false, the killed node's
   * Patroni is started again at once, in the background, to rejoin as a replica
   * (`replicating()` waits for it); with `rejoin: false` it stays down until `restart(name)`.
   */
  killLeader(options?: { rejoin?: boolean }): Promise<{ killed: string; to: string; ms: number }>;
  /** Starts again the Patroni of a node that was killed (`rejoin: false`) and waits until it streams. */
  restart(name: string): Promise<void>;
  /** Stops every process the cluster started and removes its folder. */
  stop(): Promise<void>;
  /** The end of etcd's log and of each node's (Patroni's and its Postgres's), for a failed test's message. */
  logs(lines?: number): Promise<string>;
}

export interface PatroniOptions {
  /** The leader key's life in seconds: how long a dead leader goes unnoticed. 10 by default. */
  ttl?: number;
  /** Seconds between Patroni's looks at the cluster. 1 by default. */
  loopWait?: number;
  /** Seconds Patroni retries etcd and Postgres before giving up the leadership. 4 by default; Patroni needs `loopWait + 2 × retryTimeout ≤ ttl`. */
  retryTimeout?: number;
  /** Patroni's `synchronous_mode`: a commit waits for the replica. Off by default. */
  synchronous?: boolean;
  /** With `synchronous`, Patroni's `synchronous_mode_strict`: commits wait even while no replica is there. Off by default. */
  synchronousStrict?: boolean;
}

const SCOPE = 'omb';
const NAMES = ['node1', 'node2'] as const;
const SUPERUSER = 'postgres';
const REPLICATION_USER = 'replicator';
/** How long the cluster may take to start, or a failover to finish, before a test is told why not. */
const WAIT_MS = 90_000;

const run = promisify(execFile);

interface Binaries {
  patroni: string;
  patronictl: string;
  etcd: string;
}

/**
 * Debian's packages (`apt-get install patroni etcd-server postgresql-15`), for the `system`
 * project's tests only. Never skipped: without them those tests fail and say how to get them.
 */
function binaries(): Binaries {
  const wanted: Array<[file: string, pkg: string]> = [
    ['/usr/bin/patroni', 'patroni'],
    ['/usr/bin/patronictl', 'patroni'],
    ['/usr/bin/etcd', 'etcd-server'],
    [`${PG_BIN}/postgres`, 'postgresql-15'],
  ];
  const missing = [...new Set(wanted.filter(([file]) => !existsSync(file)).map(([, pkg]) => pkg))];
  if (missing.length > 0) {
    throw new Error(`Patroni's cluster needs Debian's packages: \`apt-get install ${missing.join(' ')}\` (${missing.length} missing)`);
  }
  return { patroni: '/usr/bin/patroni', patronictl: '/usr/bin/patronictl', etcd: '/usr/bin/etcd' };
}

interface Node {
  readonly name: string;
  readonly port: number;
  readonly apiPort: number;
  readonly dir: string;
  readonly dataDir: string;
  readonly config: string;
  readonly log: string;
  patroni?: ChildProcess;
  exited?: Promise<void>;
}

/** One member's Patroni configuration: what it listens on, where its data is, and (for the first to start) the cluster's settings. */
function patroniConfig(
  node: Node,
  etcdClientPort: number,
  passwords: { superuser: string; replication: string },
  options: Required<PatroniOptions>,
) {
  return {
    scope: SCOPE,
    name: node.name,
    restapi: { listen: `127.0.0.1:${node.apiPort}`, connect_address: `127.0.0.1:${node.apiPort}` },
    // The v3 API (`etcd3`): etcd 3.4 serves Patroni's default, the v2 API (`etcd`), only when started with `--enable-v2`.
    etcd3: { hosts: [`127.0.0.1:${etcdClientPort}`], protocol: 'http' },
    bootstrap: {
      // The cluster's own settings, written to etcd by the member that initialises it; they must
      // be the same on both members, and a replica's Postgres must have at least the leader's
      // max_connections, max_wal_senders and the like.
      dcs: {
        ttl: options.ttl,
        loop_wait: options.loopWait,
        retry_timeout: options.retryTimeout,
        maximum_lag_on_failover: 1024 * 1024,
        synchronous_mode: options.synchronous,
        synchronous_mode_strict: options.synchronous && options.synchronousStrict,
        postgresql: {
          use_pg_rewind: true,
          use_slots: true,
          parameters: {
            max_connections: 100,
            wal_level: 'replica',
            hot_standby: true,
            max_wal_senders: 10,
            max_replication_slots: 10,
            wal_keep_size: '128MB',
            // pg_rewind needs it (or data checksums) to bring a killed leader back as a replica.
            wal_log_hints: true,
          },
        },
      },
      initdb: [{ encoding: 'UTF8' }, { locale: 'C' }],
    },
    postgresql: {
      listen: `127.0.0.1:${node.port}`,
      connect_address: `127.0.0.1:${node.port}`,
      data_dir: node.dataDir,
      bin_dir: PG_BIN,
      pgpass: path.join(node.dir, 'pgpass'),
      authentication: {
        superuser: { username: SUPERUSER, password: passwords.superuser },
        replication: { username: REPLICATION_USER, password: passwords.replication },
      },
      // Passwords over loopback only; no local (socket) entry, since nothing here uses the socket.
      pg_hba: ['host all all 127.0.0.1/32 scram-sha-256', 'host replication all 127.0.0.1/32 scram-sha-256'],
      parameters: {
        password_encryption: 'scram-sha-256',
        shared_buffers: '16MB',
        // Debian's default (/var/run/postgresql) is shared with any other server on the machine and may not exist.
        unix_socket_directories: node.dir,
      },
      // A killed leader that cannot be rewound is copied afresh rather than left out.
      remove_data_directory_on_rewind_failure: true,
      remove_data_directory_on_diverged_timelines: true,
    },
    // A test must never arm the machine's watchdog, which Patroni's default (`automatic`) does when it may open /dev/watchdog.
    watchdog: { mode: 'off' },
  };
}

export async function startPatroniCluster(options: PatroniOptions = {}): Promise<PatroniCluster> {
  const settings: Required<PatroniOptions> = {
    ttl: options.ttl ?? 10,
    loopWait: options.loopWait ?? 1,
    retryTimeout: options.retryTimeout ?? 4,
    synchronous: options.synchronous ?? false,
    synchronousStrict: options.synchronousStrict ?? false,
  };
  // Patroni 3.0 does not check it: with retries outlasting the leader key, a leader still retrying
  // etcd would lose its key to a failover it did not need.
  if (settings.loopWait + 2 * settings.retryTimeout > settings.ttl) {
    throw new Error(
      `Patroni needs loopWait + 2 × retryTimeout ≤ ttl (${settings.loopWait} + 2 × ${settings.retryTimeout} > ${settings.ttl})`,
    );
  }
  const bin = binaries();
  const runAs = await runAsUser();
  const owned = async (target: string) => {
    if (runAs.uid !== undefined && runAs.gid !== undefined) await chown(target, runAs.uid, runAs.gid);
  };
  // The processes run as `postgres`: their environment is a clean one, not this user's (whose PATH
  // may lead through folders `postgres` cannot read), with messages in English for the logs.
  const env = { PATH: '/usr/bin:/bin', LANG: 'C.UTF-8', LC_MESSAGES: 'C' };

  const dir = await mkdtemp(path.join(await dataFolderParent(), 'omb-patroni-'));
  await owned(dir);
  const passwords = { superuser: randomBytes(12).toString('hex'), replication: randomBytes(12).toString('hex') };
  const etcdLog = path.join(dir, 'etcd.log');
  const etcdClientPort = await freePort();
  const etcdPeerPort = await freePort();
  const nodes: Node[] = [];
  for (const name of NAMES) {
    const nodeDir = path.join(dir, name);
    await mkdir(nodeDir, { mode: 0o700 });
    await owned(nodeDir);
    nodes.push({
      name,
      port: await freePort(),
      apiPort: await freePort(),
      dir: nodeDir,
      dataDir: path.join(nodeDir, 'data'),
      config: path.join(dir, `${name}.yml`),
      log: path.join(dir, `${name}.log`),
    });
  }
  for (const node of nodes) {
    await writeFile(node.config, stringify(patroniConfig(node, etcdClientPort, passwords, settings)), { mode: 0o600 });
    await owned(node.config);
  }

  /** A detached process (its own process group) as `postgres`, its output appended to `log`. */
  const launch = (file: string, args: string[], log: string): { child: ChildProcess; exited: Promise<void> } => {
    const fd = openSync(log, 'a', 0o644);
    try {
      const child = spawn(file, args, { ...runAs, env: { ...env, HOME: dir }, cwd: dir, detached: true, stdio: ['ignore', fd, fd] });
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.once('error', () => {});
      // An abandoned cluster does not keep the test process alive: the exit hook below stops it.
      child.unref();
      return { child, exited };
    } finally {
      closeSync(fd);
    }
  };

  const etcdData = path.join(dir, 'etcd');
  const etcd = launch(
    bin.etcd,
    [
      '--name=omb-etcd',
      `--data-dir=${etcdData}`,
      `--listen-client-urls=http://127.0.0.1:${etcdClientPort}`,
      `--advertise-client-urls=http://127.0.0.1:${etcdClientPort}`,
      `--listen-peer-urls=http://127.0.0.1:${etcdPeerPort}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPeerPort}`,
      `--initial-cluster=omb-etcd=http://127.0.0.1:${etcdPeerPort}`,
      '--initial-cluster-state=new',
      `--initial-cluster-token=${path.basename(dir)}`,
      '--logger=zap',
      '--log-level=warn',
    ],
    etcdLog,
  );

  const startNode = (node: Node) => {
    const { child, exited } = launch(bin.patroni, [node.config], node.log);
    node.patroni = child;
    node.exited = exited;
  };
  const running = (child: ChildProcess | undefined): child is ChildProcess =>
    child !== undefined && child.exitCode === null && child.signalCode === null;

  /** The node's postmaster, if it runs: its pid from `postmaster.pid`, checked against the running process's command line. */
  const postmaster = (node: Node): number | undefined => {
    try {
      const pid = Number.parseInt(readFileSync(path.join(node.dataDir, 'postmaster.pid'), 'utf8').split('\n')[0] ?? '', 10);
      // The pid file outlives a killed server and the pid may be someone else's now.
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(node.dataDir) ? pid : undefined;
    } catch {
      return undefined;
    }
  };

  /**
   * `kill -9` of the node's Postgres, every process of it. Not its process group: each backend
   * makes a session of its own (setsid), so the postmaster's group holds the postmaster alone, and
   * backends outlive it, answering queries and committing for a while. The postmaster is stopped
   * first so that it starts no backend while its children are found.
   */
  const killPostgres = (node: Node) => {
    const pid = postmaster(node);
    if (pid === undefined) return;
    signal(pid, 'SIGSTOP');
    for (const child of childrenOf(pid)) signal(child, 'SIGKILL');
    signal(pid, 'SIGKILL');
  };

  /** Everything at once, as a dying machine: Patroni first, so that it cannot start its Postgres again. */
  const killNode = (node: Node) => {
    if (running(node.patroni) && node.patroni.pid) signal(-node.patroni.pid, 'SIGKILL');
    killPostgres(node);
  };
  const killEverything = () => {
    for (const node of nodes) killNode(node);
    if (running(etcd.child) && etcd.child.pid) signal(-etcd.child.pid, 'SIGKILL');
  };
  // A test process that ends without stop() (a crash, a forgotten afterAll) leaves nothing running,
  // nor the folder, which in /dev/shm holds memory.
  const abandoned = () => {
    killEverything();
    try {
      rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 50 });
    } catch {
      // A process not yet gone still writing in it: the folder stays, nothing runs.
    }
  };
  process.once('exit', abandoned);

  let stopped: Promise<void> | undefined;
  const stop = () => {
    stopped ??= (async () => {
      // Patroni's SIGTERM: a fast shutdown of its Postgres, then it leaves; SIGKILL for what is left after 20 s.
      await Promise.all(
        nodes.map(async (node) => {
          if (!running(node.patroni)) return;
          node.patroni.kill('SIGTERM');
          await Promise.race([node.exited, sleep(20_000)]);
        }),
      );
      for (const node of nodes) killNode(node);
      if (running(etcd.child)) {
        etcd.child.kill('SIGTERM');
        await Promise.race([etcd.exited, sleep(5_000)]);
      }
      killEverything();
      process.removeListener('exit', abandoned);
      await rm(dir, { recursive: true, force: true });
    })();
    return stopped;
  };

  const logs = async (lines = 200) => {
    const parts: string[] = [];
    for (const [label, file] of [['etcd', etcdLog], ...nodes.map((node) => [node.name, node.log])] as const) {
      const text = await readFile(file, 'utf8').catch(() => '(no log)');
      parts.push(`--- ${label} (${file}) ---\n${text.split('\n').slice(-lines).join('\n')}`);
    }
    return parts.join('\n');
  };

  /** Polls `check` until it gives a value; past the deadline, fails with the logs. */
  const waitFor = async <T>(what: string, check: () => Promise<T | undefined>, ms = WAIT_MS): Promise<T> => {
    const deadline = Date.now() + ms;
    for (;;) {
      if (stopped) throw new Error(`the Patroni cluster was stopped while waiting until ${what}`);
      const found = await check();
      if (found !== undefined) return found;
      if (Date.now() > deadline) throw new Error(`Patroni: timed out after ${ms} ms waiting until ${what}\n${await logs(60)}`);
      await sleep(100);
    }
  };

  const node = (name: string): Node => {
    const found = nodes.find((candidate) => candidate.name === name);
    if (!found) throw new Error(`no node ${name} in this Patroni cluster (${NAMES.join(', ')})`);
    return found;
  };
  const other = (name: string): Node => nodes.find((candidate) => candidate.name !== name)!;
  const address = (database: string, ...members: Node[]) =>
    `postgres://${SUPERUSER}:${passwords.superuser}@${members.map((member) => `127.0.0.1:${member.port}`).join(',')}/${encodeURIComponent(database)}`;

  /** Patroni's view of the cluster (`GET /cluster`), from whichever member answers. */
  const clusterView = async (): Promise<ClusterView | undefined> => {
    for (const member of nodes) {
      const view = (await restApi(member, 'cluster')) as ClusterView | undefined;
      if (view?.members) return view;
    }
    return undefined;
  };
  const leaderName = async () =>
    (await clusterView())?.members.find((member) => member.role === 'leader' && member.state === 'running')?.name;
  const leader = () => waitFor('a member leads', leaderName);

  /** A commit on the node alone (`txid_current()` takes a transaction id, refused in recovery); two seconds at most. */
  const acceptsWrites = async (member: Node): Promise<boolean> => {
    const sql = postgres(address('postgres', member), { max: 1, connect_timeout: 2, fetch_types: false, onnotice: () => {} });
    try {
      return await Promise.race([
        sql`select txid_current()`.then(
          () => true,
          () => false,
        ),
        sleep(2_000, false),
      ]);
    } finally {
      await sql.end({ timeout: 0 });
    }
  };
  const leadsAndWrites = async (member: Node) => ((await leaderName()) === member.name && (await acceptsWrites(member)) ? true : undefined);

  let rejoining: Promise<void> | undefined;
  const streaming = async (): Promise<true | undefined> => {
    const view = await clusterView();
    const head = view?.members.find((member) => member.role === 'leader' && member.state === 'running');
    if (!view || !head) return undefined;
    const follower = other(head.name);
    // Only the sync standby named in etcd may take over in synchronous mode: it must be named, not just streaming.
    if (settings.synchronous && view.members.find((member) => member.name === follower.name)?.role !== 'sync_standby') return undefined;
    const status = (await restApi(node(head.name), 'patroni')) as { replication?: ReplicationRow[] } | undefined;
    const row = status?.replication?.find((entry) => entry.application_name === follower.name);
    if (row?.state !== 'streaming' || (settings.synchronous && row.sync_state !== 'sync')) return undefined;
    return (await acceptsWrites(node(head.name))) ? true : undefined;
  };
  const replicating = async () => {
    await rejoining;
    await waitFor(`a leader accepts writes and the other member streams from it${settings.synchronous ? ' in sync' : ''}`, streaming);
  };

  const restart = async (name: string) => {
    const member = node(name);
    if (running(member.patroni)) throw new Error(`${name}'s Patroni is running: only a killed node can be restarted`);
    startNode(member);
    await replicating();
  };

  try {
    await waitFor('etcd answers', async () => {
      const health = (await getJson(`http://127.0.0.1:${etcdClientPort}/health`)) as { health?: string } | undefined;
      return health?.health === 'true' ? true : undefined;
    });
    // Both at once: one initialises the cluster (initdb), the other waits for it and copies it (pg_basebackup).
    for (const member of nodes) startNode(member);
    await replicating();
  } catch (error) {
    await stop();
    throw error;
  }

  return {
    names: NAMES,
    url: (database = 'postgres') => `${address(database, ...nodes)}?target_session_attrs=primary`,
    nodeUrl: (name, database = 'postgres') => address(database, node(name)),
    leaderUrl: async (database = 'postgres') => address(database, node(await leader())),
    leader,
    replicating,
    async createDatabase(name) {
      const head = node(await leader());
      const admin = postgres(address('postgres', head), { max: 1, connect_timeout: 10, onnotice: () => {} });
      try {
        await admin`create database ${admin(name)}`;
      } finally {
        await admin.end({ timeout: 1 });
      }
      const follower = other(head.name);
      if (running(follower.patroni)) {
        await waitFor(`${follower.name} has database ${name}`, async () => {
          const sql = postgres(address(name, follower), { max: 1, connect_timeout: 2, fetch_types: false, onnotice: () => {} });
          try {
            return await sql`select 1`.then(
              () => true,
              () => undefined,
            );
          } finally {
            await sql.end({ timeout: 0 });
          }
        });
      }
      return `${address(name, ...nodes)}?target_session_attrs=primary`;
    },
    async switchover() {
      await replicating();
      const from = await leader();
      const to = other(from);
      const started = performance.now();
      const { stdout, stderr } = await run(
        bin.patronictl,
        ['-c', nodes[0]!.config, 'switchover', SCOPE, '--leader', from, '--candidate', to.name, '--force'],
        { ...runAs, env: { ...env, HOME: dir }, cwd: dir },
      );
      // patronictl says a refused switchover and still exits 0.
      if (!/Successfully switched over/i.test(stdout))
        throw new Error(`patronictl switchover from ${from} to ${to.name} failed:\n${stdout}${stderr}`);
      await waitFor(`${to.name} leads and accepts writes after the switchover`, () => leadsAndWrites(to));
      return { from, to: to.name, ms: Math.round(performance.now() - started) };
    },
    async killLeader(killOptions = {}) {
      await replicating();
      const killed = node(await leader());
      const to = other(killed.name);
      const started = performance.now();
      killNode(killed);
      await killed.exited;
      await waitFor(`${to.name} leads and accepts writes after ${killed.name} was killed`, () => leadsAndWrites(to));
      const ms = Math.round(performance.now() - started);
      if (killOptions.rejoin !== false) {
        startNode(killed);
        rejoining = waitFor(`${killed.name} rejoins as a replica`, streaming).then(() => undefined);
        // Awaited by replicating(); a failure there is reported there, not as an unhandled rejection here.
        rejoining.catch(() => {});
      }
      return { killed: killed.name, to: to.name, ms };
    },
    restart,
    stop,
    logs,
  };
}

interface ClusterView {
  members: Array<{ name: string; role: string; state: string }>;
}

interface ReplicationRow {
  application_name: string;
  state: string;
  sync_state: string;
}

async function getJson(url: string): Promise<unknown> {
  try {
    // Patroni answers some questions with 503 and the same JSON body: the body is what counts.
    const response = await fetch(url, { signal: AbortSignal.timeout(2_000) });
    return await response.json();
  } catch {
    return undefined;
  }
}

function restApi(node: Node, endpoint: string): Promise<unknown> {
  return getJson(`http://127.0.0.1:${node.apiPort}/${endpoint}`);
}

/** The processes whose parent is `parent`, from /proc. */
function childrenOf(parent: number): number[] {
  const children: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // The parent is the second field after the command's closing parenthesis (which may itself hold spaces or parentheses).
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (Number.parseInt(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1] ?? '', 10) === parent) children.push(Number(entry));
    } catch {
      // Gone since the listing.
    }
  }
  return children;
}

/** A signal to a process (a process group when negative); one already gone is no error. */
function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}
