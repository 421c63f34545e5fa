/**
 * On a Cluster, the decisions of one turn go to each master in one write (a pipeline of one EVALSHA per
 * decision, ioredis). Against a real 3-master cluster: every master gets one pipeline per turn, the answers are
 * exactly those of separate calls, a flushed script cache is recovered per decision, and a reshard under load
 * (slots moving while decisions flow: MOVED and ASK replies) reaches no caller.
 */
import { spawnSync } from 'node:child_process';
import { Redis, type Cluster } from 'ioredis';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import type { RateLimitModuleOptions } from '../../lib/interfaces/module-options.interface';
import type { RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { RateLimiterService } from '../../lib/rate-limiter.service';
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
async function service(): Promise<{ svc: RateLimiterService; pipelines: () => number }> {
  const client = await libraryCluster(cluster!.startupNodes);
  clients.push(client);
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

describe('decisions of one turn on a Cluster', () => {
  it('go to each master in one pipeline, with the answers of separate calls', async () => {
    const { svc, pipelines } = await service();
    const trackers = Array.from({ length: 60 }, (_, i) => `client-${i}`);
    // Three turns of 60 decisions, one per tracker: allowed, allowed, rejected.
    const turns = [];
    for (let turn = 0; turn < 3; turn++) turns.push(await Promise.all(trackers.map((t) => svc.consume(policy('turns'), t))));
    expect(turns.map((decisions) => decisions.map((d) => [d.allowed, d.remaining]))).toEqual([
      trackers.map(() => [true, 1]),
      trackers.map(() => [true, 0]),
      trackers.map(() => [false, 0]),
    ]);
    expect(turns[2].every((d) => d.reason === undefined && d.retryAfterMs > 0)).toBe(true);
    // 60 trackers spread over 3 masters: one pipeline per master and turn (hot-key shedding answers none here).
    expect(pipelines()).toBe(9);
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
