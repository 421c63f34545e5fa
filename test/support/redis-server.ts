import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Cluster, Redis } from 'ioredis';

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
  for (let i = 0; i < masters; i++) {
    nodes.push(await startRedis(['--cluster-enabled', 'yes', '--cluster-config-file', `nodes-${i}.conf`, '--cluster-node-timeout', '2000']));
  }
  const addresses = nodes.map((n) => `127.0.0.1:${n.port}`);
  const created = spawnSync('redis-cli', ['--cluster', 'create', ...addresses, '--cluster-replicas', '0', '--cluster-yes'], { encoding: 'utf8' });
  if (created.status !== 0) throw new Error(`redis-cli --cluster create failed: ${created.stderr || created.stdout}`);
  const startupNodes = nodes.map((n) => ({ host: '127.0.0.1', port: n.port }));
  // Wait until every node agrees the cluster is ok.
  for (const node of nodes) {
    const probe = new Redis({ port: node.port });
    for (let attempt = 0; attempt < 100; attempt++) {
      const info = await probe.cluster('INFO');
      if (String(info).includes('cluster_state:ok')) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    probe.disconnect();
  }
  return {
    nodes,
    startupNodes,
    client: () => new Cluster(startupNodes, { redisOptions: { maxRetriesPerRequest: 1 } }),
    stop: async () => {
      await Promise.all(nodes.map((n) => n.stop(true)));
    },
  };
}
