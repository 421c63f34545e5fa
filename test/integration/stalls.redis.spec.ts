/**
 * A stalled process is not a failing store. Six decisions (limit 3) are written to Redis, then this process's
 * event loop is blocked for 150, 300 or 600 ms, longer than the default 100 ms storeTimeoutMs, while Redis
 * answers in well under a millisecond: the answers are the decisions (3 admitted, none from a fallback), and
 * the next decision is Redis's too. On the memory store, on a real redis-server and on a real 3-master Cluster,
 * with default options.
 */
import { Cluster, Redis } from 'ioredis';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import type { RateLimitDecision } from '../../lib/interfaces/decision.interface';
import type { RateLimitModuleOptions } from '../../lib/interfaces/module-options.interface';
import type { RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import type { RateLimiterService } from '../../lib/rate-limiter.service';
import type { RateLimitStore } from '../../lib/stores/store.interface';
import {
  libraryClient,
  libraryCluster,
  startRedis,
  startRedisCluster,
  type RedisClusterProcess,
  type RedisProcess,
} from '../support/redis-server';
import { blockLoop, stallAfterSending } from '../support/stall';
import { serviceOver } from '../support/store-chain';

// A sliding log: exact, and no window boundary for a test to straddle.
const POLICY: RateLimitPolicy = { algorithm: 'sliding-log', limit: 3, window: '1m' };
const STALLS = [150, 300, 600];
type Backend = 'memory' | 'redis' | 'cluster';

let redis: RedisProcess;
let cluster: RedisClusterProcess;
const clients: Array<Redis | Cluster> = [];
const stores: RateLimitStore[] = [];
const registry = new RateLimitAlgorithmRegistry();

beforeAll(async () => {
  [redis, cluster] = await Promise.all([startRedis(), startRedisCluster(3)]);
}, 60_000);

afterAll(async () => {
  for (const store of stores) await store.close();
  for (const client of clients) client.disconnect();
  await Promise.all([redis?.stop(), cluster?.stop()]);
});

/** A service with default options on `backend`, and every store error it reports. */
async function service(backend: Backend): Promise<{ svc: RateLimiterService; storeErrors: Error[] }> {
  const storeErrors: Error[] = [];
  const options: RateLimitModuleOptions = { hooks: { storeError: (e) => storeErrors.push(e) } };
  if (backend !== 'memory') {
    const client = backend === 'redis' ? await libraryClient(redis.url) : await libraryCluster(cluster.startupNodes);
    clients.push(client);
    options.redis = client;
  }
  const { svc, store } = serviceOver(options, registry);
  stores.push(store);
  return { svc, storeErrors };
}

describe.each<Backend>(['memory', 'redis', 'cluster'])('%s store, default options (storeTimeoutMs 100)', (backend) => {
  it.each(STALLS)(
    'six decisions (limit 3) then a %s ms stall: 3 admitted, none by a fallback, the next decided by the store',
    async (ms) => {
      const { svc, storeErrors } = await service(backend);
      const key = `stall-${backend}-${ms}`;
      const stall = stallAfterSending(6, ms);
      let decisions: RateLimitDecision[];
      try {
        const pending = Array.from({ length: 6 }, () => svc.consume(POLICY, key));
        // The memory store decides at once: block the loop with the decisions made, as Redis's are.
        if (backend === 'memory') blockLoop(ms);
        decisions = await Promise.all(pending);
      } finally {
        stall.restore();
      }
      expect(stall.happened).toBe(backend !== 'memory');
      expect(decisions.map((d) => d.allowed)).toEqual([true, true, true, false, false, false]);
      expect(decisions.map((d) => d.reason ?? 'counter')).toEqual(['counter', 'counter', 'counter', 'counter', 'counter', 'counter']);
      const next = await svc.consume(POLICY, `${key}-next`);
      expect(next).toMatchObject({ allowed: true, remaining: 2 });
      expect(next.reason).toBeUndefined();
      expect(storeErrors).toEqual([]);
    },
  );
});
