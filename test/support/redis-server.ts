import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import { OWNED_CLIENT_DEFAULTS } from '../../lib/stores/create-store';

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

/** A free TCP port on 127.0.0.1. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** Starts `redis-server` on a free port and waits until it answers PING. */
export async function startRedis(extraArgs: string[] = [], port?: number): Promise<RedisProcess> {
  const chosen = port ?? (await freePort());
  const dir = mkdtempSync(join(tmpdir(), 'rl-redis-'));
  let child = await launch(chosen, dir, extraArgs);
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
      child = await launch(chosen, dir, extraArgs);
    },
  };
  return handle;
}

async function launch(port: number, dir: string, extraArgs: string[]): Promise<ChildProcess> {
  mkdirSync(dir, { recursive: true });
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, ...extraArgs],
    { stdio: 'ignore' },
  );
  const probe = new Redis({ port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  // Refused connections while the server boots are expected: the loop below retries them.
  probe.on('error', () => undefined);
  for (let attempt = 0; attempt < 100; attempt++) {
    try {
      await probe.connect();
      await probe.ping();
      probe.disconnect();
      return child;
    } catch {
      probe.disconnect();
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  child.kill('SIGKILL');
  throw new Error(`redis-server did not answer on port ${port}; is redis-server installed (apt-get install redis-server)?`);
}

/** A real 3-master Redis Cluster on free ports, created with `redis-cli --cluster create`. */
export interface RedisClusterProcess {
  nodes: RedisProcess[];
  /** Seed addresses for `new Cluster(...)`. */
  startupNodes: Array<{ host: string; port: number }>;
  client(): Cluster;
  stop(): Promise<void>;
}

export async function startRedisCluster(masters = 3): Promise<RedisClusterProcess> {
  const nodes: RedisProcess[] = [];
  const stop = async () => {
    await Promise.all(nodes.map((n) => n.stop(true)));
  };
  try {
    for (let i = 0; i < masters; i++) {
      nodes.push(
        await startRedis(['--cluster-enabled', 'yes', '--cluster-config-file', `nodes-${i}.conf`, '--cluster-node-timeout', '2000']),
      );
    }
    const addresses = nodes.map((n) => `127.0.0.1:${n.port}`);
    const created = spawnSync('redis-cli', ['--cluster', 'create', ...addresses, '--cluster-replicas', '0', '--cluster-yes'], {
      encoding: 'utf8',
      timeout: 30_000,
    });
    if (created.status !== 0)
      throw new Error(`redis-cli --cluster create failed: ${created.error?.message ?? ''}${created.stderr || created.stdout}`);
    // Wait until every node agrees the cluster is ok and knows every master.
    for (const node of nodes) {
      const probe = new Redis({ port: node.port, maxRetriesPerRequest: 1 });
      try {
        let ok = false;
        for (let attempt = 0; attempt < 200 && !ok; attempt++) {
          const info = String(await probe.cluster('INFO'));
          ok = info.includes('cluster_state:ok') && info.includes(`cluster_known_nodes:${masters}`);
          if (!ok) await new Promise((r) => setTimeout(r, 50));
        }
        if (!ok) throw new Error(`cluster node ${node.port} did not reach cluster_state:ok with ${masters} known nodes within 10 s`);
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
    startupNodes,
    client: () => new Cluster(startupNodes, { redisOptions: { maxRetriesPerRequest: 1 } }),
    stop,
  };
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
    setTimeout(() => reject(new Error(`no connection to ${url} within 5 s`)), 5_000).unref();
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
    enableAutoPipelining: true,
    ...overrides,
    redisOptions: { maxRetriesPerRequest: 0, ...overrides.redisOptions },
  });
  client.on('error', () => undefined);
  await new Promise<void>((resolve, reject) => {
    client.once('ready', resolve);
    setTimeout(() => reject(new Error('no connection to the cluster within 10 s')), 10_000).unref();
  });
  return client;
}
