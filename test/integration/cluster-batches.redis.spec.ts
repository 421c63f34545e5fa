/**
 * On a Cluster, the decisions of one turn go to each master in one script call (decide.lua across slots: one
 * declared key routes it, the others are arguments). Against a real 3-master cluster: every master gets one
 * call per turn, the answers are exactly those of separate calls, a flushed script cache is recovered, a reshard
 * under load (slots moving: a decision whose key its master no longer holds goes again alone, following MOVED
 * and ASK) reaches no caller, a server that cannot compile a script across slots gets a pipeline per master
 * instead, and ioredis's keyPrefix reaches the keys passed as arguments.
 */
import { spawnSync } from 'node:child_process';
import { Redis, ReplyError, type Cluster, type ClusterOptions, type Command } from 'ioredis';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import type { RateLimitModuleOptions } from '../../lib/interfaces/module-options.interface';
import type { RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { RateLimiterService } from '../../lib/rate-limiter.service';
import { luaScript } from '../../lib/stores/redis/redis-codec';
import { composeAcrossSlotsScript } from '../../lib/stores/redis/redis-scripts';
import type { RateLimitStore } from '../../lib/stores/store.interface';
import { libraryCluster, startRedisCluster, type RedisClusterProcess } from '../support/redis-server';
import { serviceOver } from '../support/store-chain';

const registry = new RateLimitAlgorithmRegistry();
let cluster: RedisClusterProcess | undefined;
const clients: Cluster[] = [];
const stores: RateLimitStore[] = [];
const storeErrors: Error[] = [];

beforeAll(async () => {
  cluster = await startRedisCluster(3);
}, 60_000);

afterAll(async () => {
  for (const store of stores) await store.close();
  for (const client of clients) client.disconnect();
  await cluster?.stop();
});

/** A service on a cluster client of its own; counts the pipelines its client makes. */
async function service(
  overrides: ClusterOptions = {},
  wrap?: (client: Cluster) => void,
): Promise<{ svc: RateLimiterService; pipelines: () => number }> {
  const client = await libraryCluster(cluster!.startupNodes, overrides);
  clients.push(client);
  wrap?.(client);
  let pipelines = 0;
  const pipeline = client.pipeline.bind(client);
  client.pipeline = ((...args: Parameters<Cluster['pipeline']>) => {
    pipelines++;
    return pipeline(...args);
  }) as Cluster['pipeline'];
  // fail-closed with a long deadline: a fallback would show as a rejection with reason 'store-unavailable'.
  const options: RateLimitModuleOptions = {
    redis: client,
    storeTimeoutMs: 5_000,
    onStoreError: 'fail-closed',
    hooks: { storeError: (e) => storeErrors.push(e) },
  };
  const { svc, store } = serviceOver(options, registry);
  stores.push(store);
  return { svc, pipelines: () => pipelines };
}

const policy = (name: string): RateLimitPolicy => ({ algorithm: 'fixed-window', limit: 2, window: '1h', name });

/** Script calls (`EVALSHA` and `EVAL`) the masters have run so far, from their `INFO commandstats`. */
async function scriptCalls(): Promise<number> {
  let calls = 0;
  for (const node of cluster!.masters) {
    const admin = new Redis({ port: node.port });
    const stats = String(await admin.info('commandstats'));
    admin.disconnect();
    for (const match of stats.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)) calls += Number(match[1]);
  }
  return calls;
}

/** Three turns of one decision per tracker on a limit of 2: allowed, allowed, rejected. */
async function threeTurns(svc: RateLimiterService, name: string, trackers: readonly string[]): Promise<void> {
  const turns = [];
  for (let turn = 0; turn < 3; turn++) turns.push(await Promise.all(trackers.map((t) => svc.consume(policy(name), t))));
  expect(turns.map((decisions) => decisions.map((d) => [d.allowed, d.remaining]))).toEqual([
    trackers.map(() => [true, 1]),
    trackers.map(() => [true, 0]),
    trackers.map(() => [false, 0]),
  ]);
  expect(turns[2].every((d) => d.reason === undefined && d.retryAfterMs > 0)).toBe(true);
}

describe('decisions of one turn on a Cluster', () => {
  it('go to each master in one script call across slots, with the answers of separate calls', async () => {
    const { svc, pipelines } = await service();
    const trackers = Array.from({ length: 60 }, (_, i) => `client-${i}`);
    const before = await scriptCalls();
    await threeTurns(svc, 'turns', trackers);
    // 60 trackers spread over 3 masters: one call per master and turn (the first of each may be EVALSHA's NOSCRIPT,
    // then EVAL: at most one more per master), and no pipeline.
    expect(await scriptCalls()).toBeGreaterThanOrEqual(before + 9);
    expect(await scriptCalls()).toBeLessThanOrEqual(before + 12);
    expect(pipelines()).toBe(0);
    expect(storeErrors).toEqual([]);
  });

  it('a server that cannot compile a script across slots (Redis 6, KeyDB) gets one pipeline per master and turn', async () => {
    const across = luaScript(composeAcrossSlotsScript(registry.all()));
    let refused = 0;
    // The reply Redis 6.2 and KeyDB give such a script: its first line does not compile (nothing runs).
    // On every node's connection: a batch goes to its master's own connection.
    const redis6 = (client: Cluster) => {
      for (const node of client.nodes('all')) refuse(node);
    };
    const refuse = (node: Redis) => {
      const send = node.sendCommand.bind(node);
      node.sendCommand = ((command: Command) => {
        const [script] = command.args;
        if ((command.name === 'evalsha' && script === across.sha) || (command.name === 'eval' && script === across.lua)) {
          refused++;
          command.reject(
            command.name === 'evalsha'
              ? new ReplyError('NOSCRIPT No matching script. Please use EVAL.')
              : new ReplyError("ERR Error compiling script (new function): user_script:1: unexpected symbol near '#'"),
          );
          return command.promise;
        }
        return send(command);
      }) as Redis['sendCommand'];
    };
    const { svc, pipelines } = await service({}, redis6);
    await threeTurns(
      svc,
      'redis6',
      Array.from({ length: 60 }, (_, i) => `old-server-${i}`),
    );
    // The first turn's three batches, in flight together, each learnt it (EVALSHA, then EVAL) and went again as a
    // pipeline; every later batch went as a pipeline at once.
    expect(refused).toBe(6);
    expect(pipelines()).toBe(9);
    expect(storeErrors).toEqual([]);
  });

  it("ioredis's keyPrefix reaches every key of a batch across slots", async () => {
    const { svc } = await service({ keyPrefix: 'app:' });
    const trackers = Array.from({ length: 30 }, (_, i) => `prefixed-${i}`);
    await threeTurns(svc, 'prefixed', trackers);
    const keys: string[] = [];
    for (const node of cluster!.masters) {
      const admin = new Redis({ port: node.port });
      keys.push(...(await admin.keys('*prefixed-*')));
      admin.disconnect();
    }
    expect(keys).toHaveLength(trackers.length);
    expect(keys.every((key) => key.startsWith('app:rl:'))).toBe(true);
    expect(storeErrors).toEqual([]);
  });

  it('recover from a flushed script cache decision by decision (NOSCRIPT: nothing ran, so nothing counts twice)', async () => {
    const { svc } = await service();
    const trackers = Array.from({ length: 30 }, (_, i) => `flushed-${i}`);
    await Promise.all(trackers.map((t) => svc.consume(policy('flush'), t)));
    for (const node of cluster!.masters) {
      const admin = new Redis({ port: node.port });
      await admin.script('FLUSH');
      admin.disconnect();
    }
    const second = await Promise.all(trackers.map((t) => svc.consume(policy('flush'), t)));
    const third = await Promise.all(trackers.map((t) => svc.consume(policy('flush'), t)));
    expect(second.map((d) => [d.allowed, d.remaining])).toEqual(trackers.map(() => [true, 0]));
    expect(third.map((d) => d.allowed)).toEqual(trackers.map(() => false));
    expect(storeErrors).toEqual([]);
  });

  it('a reshard under load (slots moving: MOVED and ASK) reaches no caller, and every limit holds exactly', async () => {
    const { svc } = await service();
    const admin = new Redis({ port: cluster!.masters[0].port });
    const ids = String(await admin.cluster('MYID'));
    admin.disconnect();
    const target = new Redis({ port: cluster!.masters[1].port });
    const targetId = String(await target.cluster('MYID'));
    target.disconnect();
    const limited: RateLimitPolicy = { algorithm: 'fixed-window', limit: 50, window: '1h', name: 'reshard' };
    const trackers = Array.from({ length: 200 }, (_, i) => `moving-${i}`);
    let resharding = true;
    const answers: Array<{ allowed: boolean; reason?: string }> = [];
    // Turns of one decision per tracker, for as long as the reshard runs and at least 60 (past every limit).
    const load = (async () => {
      for (let turn = 0; resharding || turn < 60; turn++) {
        answers.push(...(await Promise.all(trackers.map((t) => svc.consume(limited, t)))));
      }
    })();
    // Move 2,000 slots of the first master to the second while the load runs.
    const moved = await new Promise<ReturnType<typeof spawnSync>>((resolve) =>
      setTimeout(
        () =>
          resolve(
            spawnSync(
              'redis-cli',
              [
                '--cluster',
                'reshard',
                `127.0.0.1:${cluster!.masters[0].port}`,
                '--cluster-from',
                ids,
                '--cluster-to',
                targetId,
                '--cluster-slots',
                '2000',
                '--cluster-yes',
              ],
              { encoding: 'utf8', timeout: 60_000 },
            ),
          ),
        100,
      ),
    );
    resharding = false;
    await load;
    expect(moved.status).toBe(0);
    expect(answers.filter((a) => a.reason === 'store-unavailable')).toEqual([]);
    expect(storeErrors).toEqual([]);
    // Each tracker was admitted exactly its limit, wherever its slot went.
    const admittedPer = await Promise.all(trackers.map(async (t) => 50 - (await svc.peek(limited, t)).remaining));
    expect(new Set(admittedPer)).toEqual(new Set([50]));
    expect(answers.filter((a) => a.allowed)).toHaveLength(trackers.length * 50);
    console.log(`reshard of 2,000 slots under load: ${answers.length} decisions, 0 errors`);
  }, 90_000);
});
