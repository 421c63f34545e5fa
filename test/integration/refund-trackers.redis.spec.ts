/**
 * A refund may cover calls of several trackers (a route whose policies use `by: 'ip'` and `by: 'user'`,
 * each `countOnly`): on a real 3-master Cluster their keys live in different slots, so the engine gives each
 * tracker's calls back in a call of its own (one script call may not cross slots).
 */
import type { Cluster } from 'ioredis';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import { RateLimitEngine, type PolicyRequest } from '../../lib/pipeline/rate-limit.engine';
import { RedisStore } from '../../lib/stores/redis/redis.store';
import { compilePolicy } from '../../lib/policy/compile-policy';
import { trackerKeyPrefix } from '../../lib/shared/keys';
import { libraryCluster, startRedisCluster, type RedisClusterProcess } from '../support/redis-server';

const registry = new RateLimitAlgorithmRegistry();
let cluster: RedisClusterProcess | undefined;
let client: Cluster | undefined;

beforeAll(async () => {
  cluster = await startRedisCluster();
  client = await libraryCluster(cluster.startupNodes);
}, 60_000);

afterAll(async () => {
  client?.disconnect();
  await cluster?.stop();
});

function request(name: string): PolicyRequest {
  const compiled = compilePolicy(
    { algorithm: 'fixed-window', limit: 5, window: '1h', name, countOnly: 'failed' },
    registry,
    'test',
    'r=T.m',
  );
  return { compiled, params: compiled.staticParams!, cost: 1 };
}

test('calls of two trackers on different Cluster slots are given back together', async () => {
  const store = new RedisStore(client!, registry.all(), false, false);
  const engine = new RateLimitEngine(store);
  const ip = trackerKeyPrefix('rt', 'ip:203.0.113.7');
  const user = trackerKeyPrefix('rt', 'user:42');
  expect(await client!.cluster('KEYSLOT', `${ip}x`)).not.toBe(await client!.cluster('KEYSLOT', `${user}x`));

  const byIp = await engine.decide(ip, [request('per-ip')], 'consume');
  const byUser = await engine.decide(user, [request('per-user')], 'consume');
  expect([byIp.decisions[0].remaining, byUser.decisions[0].remaining]).toEqual([4, 4]);

  // What one store call of both would meet (nothing runs, so nothing is given back twice below).
  await expect(store.refund([...byIp.calls, ...byUser.calls])).rejects.toThrow(/same slot/);
  await engine.refund([...byIp.calls, ...byUser.calls]);

  const after = await Promise.all([engine.decide(ip, [request('per-ip')], 'peek'), engine.decide(user, [request('per-user')], 'peek')]);
  expect(after.map((d) => d.decisions[0].remaining)).toEqual([5, 5]);
});
