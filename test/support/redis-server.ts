import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import { OWNED_CLIENT_DEFAULTS } from '../../lib/pipeline/create-store';

/** A redis-server process this test started, on a free port, with no persistence. */
export interface RedisProcess {
  port: number;
  url: string;
  process: ChildProcess;
  /** SIGSTOP / SIGCONT for chaos tests. */
  pause(): void;
  resume(): void;
  /** Stops the server (SIGKILL when `hard`) and waits for it to exit. */
  stop(hard?: boolean): Promise<void>;
  /** Starts a new server on the same port (after `stop`). */
  restart(): Promise<void>;
}

/** A free TCP port on 127.0.0.1 (with `busOffset`, one whose port + `busOffset` is free too). */
export async function freePort(busOffset?: number): Promise<number> {
  for (;;) {
    const port = await listenOnce(0);
    if (busOffset === undefined) return port;
    // A cluster node also listens on its bus port (port + 10000): both must be free, and the bus port below 65536.
    if (port + busOffset < 65_536 && (await listenOnce(port + busOffset).catch(() => undefined)) !== undefined) return port;
  }
}

function listenOnce(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(port, '127.0.0.1', () => {
      const { port: bound } = server.address() as { port: number };
      server.close(() => resolve(bound));
    });
  });
}

/** How many times a server on a port this module chose is started again on another port after it exited at startup. */
const START_ATTEMPTS = 5;

/**
 * Starts `redis-server` on a free port and waits until it answers PING.
 * A free port can be taken between the check and redis-server's bind (by another test's connection, say): when
 * the server exits at startup on a port chosen here, it starts again on another one.
 * @param configFile contents of a config file to start from (a sentinel needs one: see {@link startRedisSentinel}).
 */
export async function startRedis(extraArgs: string[] = [], port?: number, configFile?: string): Promise<RedisProcess> {
  const busOffset = extraArgs.includes('--cluster-enabled') ? 10_000 : undefined;
  let chosen = port ?? (await freePort(busOffset));
  let dir = mkdtempSync(join(tmpdir(), 'rl-redis-'));
  let child: ChildProcess;
  for (let attempt = 1; ; attempt++) {
    try {
      child = await launch(chosen, dir, extraArgs, configFile);
      break;
    } catch (error) {
      rmSync(dir, { recursive: true, force: true });
      if (port !== undefined || !(error instanceof ExitedAtStartup) || attempt === START_ATTEMPTS) throw error;
      chosen = await freePort(busOffset);
      dir = mkdtempSync(join(tmpdir(), 'rl-redis-'));
    }
  }
  const handle: RedisProcess = {
    port: chosen,
    url: `redis://127.0.0.1:${chosen}`,
    get process() {
      return child;
    },
    pause: () => child.kill('SIGSTOP'),
    resume: () => child.kill('SIGCONT'),
    stop: async (hard = false) => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGCONT');
      child.kill(hard ? 'SIGKILL' : 'SIGTERM');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
    restart: async () => {
      child = await launch(chosen, dir, extraArgs, configFile);
    },
  };
  return handle;
}

/** redis-server exited before it answered; `log` is the end of its log (why, e.g. the port was taken). */
class ExitedAtStartup extends Error {
  constructor(port: number, code: number | null, log: string) {
    super(`redis-server on port ${port} exited at startup (code ${code}):\n${log}`);
  }
}

/** How much of a server's log an error at startup quotes. */
const LOG_TAIL_CHARS = 2_000;

async function launch(port: number, dir: string, extraArgs: string[], configFile?: string): Promise<ChildProcess> {
  mkdirSync(dir, { recursive: true });
  // A sentinel reads its monitoring setup from a config file (the first argument), which it rewrites with what it
  // learns: written once, not over the sentinel's own version.
  const configPath = join(dir, 'redis.conf');
  if (configFile !== undefined && !existsSync(configPath)) writeFileSync(configPath, configFile);
  const logPath = join(dir, 'redis.log');
  const child = spawn(
    'redis-server',
    [
      ...(configFile !== undefined ? [configPath] : []),
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--dir',
      dir,
      '--logfile',
      logPath,
      ...extraArgs,
    ],
    { stdio: 'ignore' },
  );
  const logTail = () => (existsSync(logPath) ? readFileSync(logPath, 'utf8').slice(-LOG_TAIL_CHARS) : '(no log written)');
  let spawnError: Error | undefined;
  child.once('error', (error) => (spawnError = error));
  try {
    for (let attempt = 0; attempt < 300; attempt++) {
      if (spawnError)
        throw new Error(`redis-server could not be started (${spawnError.message}); install it: apt-get install redis-server`);
      if (child.exitCode !== null || child.signalCode !== null) throw new ExitedAtStartup(port, child.exitCode, logTail());
      const probe = new Redis({ port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, commandTimeout: 1_000 });
      // Refused connections while the server boots are expected: the loop retries them.
      probe.on('error', () => undefined);
      try {
        await probe.connect();
        // The server answering must be this one, not another that holds the port while this one failed to bind.
        const pid = /process_id:(\d+)/.exec(await probe.info('server'))?.[1];
        probe.disconnect();
        if (pid === String(child.pid)) return child;
        await new Promise((r) => setTimeout(r, 50));
      } catch {
        // A probe that never connected has ended already; disconnect() would leave ioredis's 2 s disconnect timer behind.
        if (probe.status !== 'end') probe.disconnect();
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    throw new Error(`redis-server did not answer on port ${port} within 15 s; the end of its log:\n${logTail()}`);
  } catch (error) {
    child.kill('SIGKILL');
    throw error;
  }
}

/** A real Redis Cluster on free ports, created with `redis-cli --cluster create`. */
export interface RedisClusterProcess {
  nodes: RedisProcess[];
  /** The nodes created as masters, and as their replicas (roles at creation; a failover swaps them). */
  masters: RedisProcess[];
  replicas: RedisProcess[];
  /** Seed addresses for `new Cluster(...)`. */
  startupNodes: Array<{ host: string; port: number }>;
  client(): Cluster;
  stop(): Promise<void>;
}

/** Options of {@link startRedisCluster}. */
export interface RedisClusterOptions {
  /** Replicas per master (`--cluster-replicas`). @default 0 */
  replicas?: number;
  /** `cluster-node-timeout`, ms: how long a master may be unreachable before its replica takes over. @default 2000 */
  nodeTimeoutMs?: number;
  /** More arguments for every node (e.g. `['--cluster-require-full-coverage', 'no']`). */
  serverArgs?: string[];
}

/** A real Redis Cluster of `masters` masters (3 by default) and, with `options.replicas`, their replicas. */
export async function startRedisCluster(masters = 3, options: RedisClusterOptions = {}): Promise<RedisClusterProcess> {
  const { replicas = 0, nodeTimeoutMs = 2_000, serverArgs = [] } = options;
  const total = masters * (1 + replicas);
  const nodes: RedisProcess[] = [];
  const stop = async () => {
    await Promise.all(nodes.map((n) => n.stop(true)));
  };
  const roles: { masters: RedisProcess[]; replicas: RedisProcess[] } = { masters: [], replicas: [] };
  try {
    for (let i = 0; i < total; i++) {
      nodes.push(
        await startRedis([
          '--cluster-enabled',
          'yes',
          '--cluster-config-file',
          `nodes-${i}.conf`,
          '--cluster-node-timeout',
          String(nodeTimeoutMs),
          ...serverArgs,
        ]),
      );
    }
    const addresses = nodes.map((n) => `127.0.0.1:${n.port}`);
    const created = spawnSync('redis-cli', ['--cluster', 'create', ...addresses, '--cluster-replicas', String(replicas), '--cluster-yes'], {
      encoding: 'utf8',
      timeout: 30_000,
    });
    if (created.status !== 0)
      throw new Error(`redis-cli --cluster create failed: ${created.error?.message ?? ''}${created.stderr || created.stdout}`);
    // Wait until every node agrees the cluster is ok and knows every node, and every replica is in sync.
    for (const node of nodes) {
      const probe = new Redis({ port: node.port, maxRetriesPerRequest: 1 });
      try {
        const ready = await waitFor(async () => {
          const info = String(await probe.cluster('INFO'));
          if (!info.includes('cluster_state:ok') || !info.includes(`cluster_known_nodes:${total}\r`)) return false;
          const replication = await probe.info('replication');
          return replication.includes('role:master') || replication.includes('master_link_status:up');
        }, 20_000);
        if (!ready)
          throw new Error(
            `cluster node ${node.port} did not reach cluster_state:ok with ${total} known nodes (replicas in sync) within 20 s`,
          );
        const role = await probe.info('replication');
        (role.includes('role:master') ? roles.masters : roles.replicas).push(node);
      } finally {
        probe.disconnect();
      }
    }
  } catch (error) {
    await stop();
    throw error;
  }
  const startupNodes = nodes.map((n) => ({ host: '127.0.0.1', port: n.port }));
  return {
    nodes,
    ...roles,
    startupNodes,
    client: () => new Cluster(startupNodes, { redisOptions: { maxRetriesPerRequest: 1 } }),
    stop,
  };
}

/** Polls `check` every 50 ms until it is true (true) or `limitMs` has passed (false); errors count as false. */
async function waitFor(check: () => Promise<boolean>, limitMs: number): Promise<boolean> {
  const started = Date.now();
  while (Date.now() - started < limitMs) {
    if (await check().catch(() => false)) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return false;
}

/** A Redis master, its replicas and the sentinels monitoring them, on free ports. */
export interface RedisSentinelProcess {
  /** The master name the sentinels monitor (ioredis `name`). */
  name: string;
  /** The master at startup (a failover makes one of the replicas master). */
  master: RedisProcess;
  replicas: RedisProcess[];
  sentinels: RedisProcess[];
  /** Addresses for ioredis `sentinels`. */
  sentinelAddresses: Array<{ host: string; port: number }>;
  /** Every server by port, whatever its role now. */
  byPort(port: number): RedisProcess;
  stop(): Promise<void>;
}

/** Options of {@link startRedisSentinel}. */
export interface RedisSentinelOptions {
  /** @default 'mymaster' */
  name?: string;
  /** @default 1 */
  replicas?: number;
  /** @default 3 */
  sentinels?: number;
  /** Sentinels that must agree the master is down before a failover. @default 2 */
  quorum?: number;
  /** `down-after-milliseconds`. @default 1000 */
  downAfterMs?: number;
  /** `failover-timeout`, ms. @default 5000 */
  failoverTimeoutMs?: number;
  /** More arguments for the master and the replicas (e.g. `['--min-replicas-to-write', '1']`). */
  serverArgs?: string[];
}

/**
 * A real Sentinel setup: a master, `replicas` replicas (`--replicaof`) and `sentinels` sentinels
 * (`redis-server <conf> --sentinel`). Resolves once every replica is in sync and every sentinel knows every
 * replica and every other sentinel, so `SENTINEL FAILOVER` can promote at once.
 */
export async function startRedisSentinel(options: RedisSentinelOptions = {}): Promise<RedisSentinelProcess> {
  const {
    name = 'mymaster',
    replicas = 1,
    sentinels = 3,
    quorum = 2,
    downAfterMs = 1_000,
    failoverTimeoutMs = 5_000,
    serverArgs = [],
  } = options;
  const servers: RedisProcess[] = [];
  const stop = async () => {
    // Sentinels first, so none reconfigures the servers while they go down.
    await Promise.all(servers.filter((s) => started.sentinels.includes(s)).map((s) => s.stop(true)));
    await Promise.all(servers.map((s) => s.stop(true)));
  };
  const started = { sentinels: [] as RedisProcess[], replicas: [] as RedisProcess[] };
  try {
    const master = await startRedis(serverArgs);
    servers.push(master);
    for (let i = 0; i < replicas; i++) {
      const replica = await startRedis(['--replicaof', '127.0.0.1', String(master.port), ...serverArgs]);
      servers.push(replica);
      started.replicas.push(replica);
    }
    const config = [
      `sentinel monitor ${name} 127.0.0.1 ${master.port} ${quorum}`,
      `sentinel down-after-milliseconds ${name} ${downAfterMs}`,
      `sentinel failover-timeout ${name} ${failoverTimeoutMs}`,
      '',
    ].join('\n');
    for (let i = 0; i < sentinels; i++) {
      const sentinel = await startRedis(['--sentinel'], undefined, config);
      servers.push(sentinel);
      started.sentinels.push(sentinel);
    }
    for (const sentinel of started.sentinels) {
      const probe = new Redis({ port: sentinel.port, maxRetriesPerRequest: 1 });
      try {
        const ready = await waitFor(async () => {
          const known = (await probe.call('SENTINEL', 'REPLICAS', name)) as string[][];
          const inSync = known.filter((fields) => {
            const info = Object.fromEntries(fields.flatMap((v, i) => (i % 2 === 0 ? [[v, fields[i + 1]]] : [])));
            return info.flags === 'slave' && info['master-link-status'] === 'ok';
          });
          const peers = (await probe.call('SENTINEL', 'SENTINELS', name)) as unknown[];
          return inSync.length === replicas && peers.length === sentinels - 1;
        }, 20_000);
        if (!ready)
          throw new Error(`sentinel ${sentinel.port} did not learn ${replicas} replicas and ${sentinels - 1} other sentinels within 20 s`);
      } finally {
        probe.disconnect();
      }
    }
    return {
      name,
      master,
      replicas: started.replicas,
      sentinels: started.sentinels,
      sentinelAddresses: started.sentinels.map((s) => ({ host: '127.0.0.1', port: s.port })),
      byPort: (port) => {
        const found = servers.find((s) => s.port === port);
        if (!found) throw new Error(`no server of this setup listens on ${port}`);
        return found;
      },
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/**
 * A client set up as the library sets up the clients it creates (no offline queue, no retries per
 * command, auto-pipelining, background reconnects), already connected: a store built on it decides
 * against Redis from its first call. (A store built from a URL connects in the background, and its first
 * decisions fall back until the connection is ready.) The caller closes it.
 */
export async function libraryClient(url: string, overrides: RedisOptions = {}): Promise<Redis> {
  const client = new Redis(url, { ...OWNED_CLIENT_DEFAULTS, ...overrides });
  client.on('error', () => undefined);
  await new Promise<void>((resolve, reject) => {
    client.once('ready', resolve);
    setTimeout(() => reject(new Error(`no connection to ${url} within 15 s`)), 15_000).unref();
  });
  return client;
}

/** The same for a cluster: every node connected and the slot map loaded. */
export async function libraryCluster(
  startupNodes: Array<{ host: string; port: number }>,
  overrides: ClusterOptions = {},
): Promise<Cluster> {
  const client = new Cluster(startupNodes, {
    enableOfflineQueue: false,
    ...overrides,
    redisOptions: { maxRetriesPerRequest: 0, ...overrides.redisOptions },
  });
  client.on('error', () => undefined);
  await new Promise<void>((resolve, reject) => {
    client.once('ready', resolve);
    setTimeout(() => reject(new Error('no connection to the cluster within 15 s')), 15_000).unref();
  });
  return client;
}

/**
 * Script calls a Redis has run since its last `CONFIG RESETSTAT`: `EVALSHA` (and `EVAL` for a script's first load
 * on a connection), or `FCALL` of the function library the store loaded.
 */
export async function scriptCalls(client: Redis): Promise<number> {
  const info = await client.info('commandstats');
  const calls = (name: string) => Number(new RegExp(`^cmdstat_${name}:calls=(\\d+)`, 'm').exec(info)?.[1] ?? 0);
  return calls('evalsha') + calls('eval') + calls('fcall');
}
