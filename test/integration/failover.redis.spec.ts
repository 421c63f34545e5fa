/**
 * Cluster failover, once per client library (ioredis, node-redis, Valkey GLIDE): a real 3-master + 3-replica
 * cluster (`cluster-node-timeout` 1 s, `cluster-require-full-coverage no`) under a steady load of decisions on
 * trackers of every master, and SIGKILL of one master. The same assertions for every client:
 *  - no decision fails (each is answered, by Redis or by the fail-closed fallback);
 *  - the killed master's keys fall back while it is down, and Redis decides them again once its replica is
 *    promoted (within 20 s);
 *  - where the client has a slot map (ioredis, node-redis), the store-error circuit is per master: keys of the
 *    other masters never fall back. GLIDE exposes no slot map: one circuit for the whole cluster, so they may.
 * The module builds the store (createStore) around a client of the library's, as an app passes it in.
 */
import { Logger } from '@nestjs/common';
import { Redis } from 'ioredis';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import type { RateLimitModuleOptions } from '../../lib/interfaces/module-options.interface';
import type { RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { RedisStore } from '../../lib/stores/redis/redis.store';
import { trackerKeyPrefix } from '../../lib/shared/keys';
import { backOnRedis, steadyLoad, trackersByMaster } from '../support/master-outage';
import { REDIS_CLIENTS } from '../support/redis-clients';
import { startRedisCluster } from '../support/redis-server';
import { serviceOver } from '../support/store-chain';

const registry = new RateLimitAlgorithmRegistry();
const PREFIX = 'fo';
const TRACKERS_PER_MASTER = 20;
const big: RateLimitPolicy = { algorithm: 'fixed-window', limit: 1_000_000, window: '1h', name: 'big' };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const now = () => performance.now();

beforeEach(() => {
  jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  jest.spyOn(Logger.prototype, 'log').mockImplementation(() => undefined);
});

afterEach(() => {
  jest.restoreAllMocks();
});

describe.each(REDIS_CLIENTS)('$name: SIGKILL of one master of three (each has a replica)', (kind) => {
  it('no decision fails; its keys fall back, then Redis decides them again; with a slot map, the other masters never fall back', async () => {
    const cluster = await startRedisCluster(3, {
      replicas: 1,
      nodeTimeoutMs: 1_000,
      serverArgs: ['--cluster-require-full-coverage', 'no'],
    });
    const probe = new Redis({ port: cluster.masters[1].port, maxRetriesPerRequest: 1 });
    const client = await kind.connectCluster(cluster.startupNodes);
    const options: RateLimitModuleOptions = {
      redis: client,
      prefix: PREFIX,
      onStoreError: 'fail-closed',
      hotKeyShedding: false,
      // Long enough that a busy box never turns a healthy master's decision into a fallback; the killed master's
      // calls fail at once (its connection is gone), not at the deadline.
      storeTimeoutMs: 1_000,
    };
    const { svc, store } = serviceOver(options, registry);
    // Whether this client has a slot map: the store then knows each key's master.
    const bare = new RedisStore(client, registry.all(), false);
    try {
      const byMaster = await trackersByMaster(
        probe,
        cluster.masters.map((m) => m.port),
        PREFIX,
        TRACKERS_PER_MASTER,
      );
      const perShard = bare.nodeOf(trackerKeyPrefix(PREFIX, byMaster.get(cluster.masters[1].port)![0])) !== undefined;
      const { samples, failures, stop } = steadyLoad((tracker) => svc.consume(big, tracker), byMaster, 5);

      await sleep(500);
      const victim = cluster.masters[0].port;
      const killedAt = now();
      await cluster.masters[0].stop(true);
      const backAt = await backOnRedis(samples, victim, killedAt);
      await stop();

      const afterKill = samples.filter((s) => s.at > killedAt);
      const victimFallbacks = afterKill.filter((s) => s.master === victim && !s.byRedis).length;
      const healthy = afterKill.filter((s) => s.master !== victim);
      const healthyFallbacks = healthy.filter((s) => !s.byRedis).length;
      console.log(
        `${kind.name}: SIGKILL of 1 of 3 masters; its keys decided by Redis again ${Math.round(backAt - killedAt)} ms after the kill ` +
          `(${victimFallbacks} fallbacks meanwhile); other masters' keys: ${healthyFallbacks} fallbacks of ${healthy.length} ` +
          `decisions (${perShard ? 'a circuit per master' : 'one circuit for the cluster'})`,
      );
      expect(failures).toEqual([]);
      expect(victimFallbacks).toBeGreaterThan(0);
      expect(backAt).toBeLessThan(Infinity);
      expect(healthy.length).toBeGreaterThan(100);
      expect(perShard).toBe(kind.name !== 'GLIDE');
      if (perShard) expect(healthyFallbacks).toBe(0);
    } finally {
      await bare.close();
      await store.close();
      await kind.close(client);
      probe.disconnect();
      await cluster.stop();
    }
  }, 60_000);
});
