/**
 * Reserve, then settle, on the memory store, a real Redis and a real 3-master Redis Cluster, through the
 * module's own store (shedding over resilient over Redis):
 *  - every counting algorithm gives the same remaining quota on all three after a give-back and an overdraw,
 *    and the overdrawn key waits as long as the algorithm says (exact where no time passes, bounded on Redis);
 *  - an overdraft is clamped to the capacity (a fixed window's count, a sliding log's entries in Redis);
 *  - settling two policies is one script call;
 *  - a window that rolled over between reserve and settle gets nothing back that was counted in the previous
 *    one (real time, windows of 2 s, aligned on Redis's TIME).
 */
import { Redis, type Cluster } from 'ioredis';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import type { RateLimitDecision } from '../../lib/interfaces/decision.interface';
import type { RateLimitModuleOptions } from '../../lib/interfaces/module-options.interface';
import type { RateLimitAlgorithmName, RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { RateLimiterService } from '../../lib/rate-limiter.service';
import type { RateLimitStore } from '../../lib/stores/store.interface';
import {
  libraryClient,
  libraryCluster,
  startRedis,
  startRedisCluster,
  type RedisClusterProcess,
  type RedisProcess,
} from '../support/redis-server';
import { serviceOver } from '../support/store-chain';

const registry = new RateLimitAlgorithmRegistry();
const PREFIX = 'res';
const HOUR = 3_600_000;
const BUCKETS: RateLimitAlgorithmName[] = ['token-bucket', 'gcra', 'leaky-bucket'];
const COUNTING: RateLimitAlgorithmName[] = ['fixed-window', 'sliding-window', 'sliding-log', ...BUCKETS];
type StoreName = 'memory' | 'redis' | 'cluster';
const STORES: StoreName[] = ['memory', 'redis', 'cluster'];

let standalone: RedisProcess | undefined;
let cluster: RedisClusterProcess | undefined;
let redis: Redis;
let clusterClient: Cluster;
const stores: RateLimitStore[] = [];
const storeErrors: Error[] = [];
const limiters = {} as Record<StoreName, RateLimiterService>;
let trackers = 0;
const tracker = () => `res-${process.pid}-${++trackers}`;

function service(client?: Redis | Cluster): RateLimiterService {
  // fail-closed with a long deadline: a fallback would show as a rejection with reason 'store-unavailable'.
  const options: RateLimitModuleOptions = {
    redis: client,
    prefix: PREFIX,
    storeTimeoutMs: 5_000,
    onStoreError: 'fail-closed',
    hooks: { storeError: (e) => storeErrors.push(e) },
  };
  const { svc, store } = serviceOver(options, registry);
  stores.push(store);
  return svc;
}

beforeAll(async () => {
  [standalone, cluster] = await Promise.all([startRedis(), startRedisCluster(3)]);
  redis = await libraryClient(standalone.url);
  clusterClient = await libraryCluster(cluster.startupNodes);
  limiters.memory = service();
  limiters.redis = service(redis);
  limiters.cluster = service(clusterClient);
}, 60_000);

afterAll(async () => {
  for (const store of stores) await store.close();
  redis?.disconnect();
  clusterClient?.disconnect();
  await cluster?.stop();
  await standalone?.stop();
});

afterEach(() => {
  expect(storeErrors.splice(0).map((e) => e.message)).toEqual([]);
});

const line = (step: string, d: RateLimitDecision) => `${step}: ${d.allowed ? 'allowed' : 'rejected'} remaining=${d.remaining}`;

/** A give-back, then an overdraw to 12 units of 10; the decisions, and the overdrawn key's wait. */
async function scenario(limiter: RateLimiterService, p: RateLimitPolicy, key: string) {
  const started = Date.now();
  const out: string[] = [];
  const first = await limiter.reserve(p, key, { cost: 6 });
  out.push(line('reserve 6', first.decision));
  await first.settle(2);
  out.push(line('settled at 2', await limiter.peek(p, key)));
  const second = await limiter.reserve(p, key, { cost: 4 });
  out.push(line('reserve 4', second.decision));
  await second.settle(10);
  const after = await limiter.consume(p, key);
  out.push(line('settled at 10, then consume', after));
  return { out, retryAfterMs: after.retryAfterMs, moreQuotaMs: after.moreQuotaMs, spentMs: Date.now() - started + 2 };
}

describe.each(COUNTING)('reserve and settle on memory, Redis and the Cluster: %s', (algorithm) => {
  const p: RateLimitPolicy = { algorithm, limit: 10, window: '1h', name: `p-${algorithm}` };

  it.each(STORES)('on %s: the same quota left after a give-back and an overdraw, and the wait it implies', async (store) => {
    const { out, retryAfterMs, moreQuotaMs, spentMs } = await scenario(limiters[store], p, tracker());
    expect(out).toEqual([
      'reserve 6: allowed remaining=4',
      'settled at 2: allowed remaining=8',
      'reserve 4: allowed remaining=4',
      'settled at 10, then consume: rejected remaining=0',
    ]);
    // 12 units of 10: the buckets wait for 3 units to refill (one per 6 min); sliding-log for the 3rd
    // oldest entry, charged by the second reservation, to age out; the windows for their end (not aligned).
    const exact = BUCKETS.includes(algorithm) ? 3 * 360_000 : algorithm === 'sliding-log' ? HOUR : undefined;
    if (exact !== undefined) {
      expect(retryAfterMs).toBeGreaterThanOrEqual(exact - spentMs);
      expect(retryAfterMs).toBeLessThanOrEqual(exact);
      // `remaining` leaves 0 when one unit fits: the header's `t` is that same wait.
      expect(moreQuotaMs).toBe(retryAfterMs);
    } else {
      expect(retryAfterMs).toBeGreaterThan(0);
      expect(retryAfterMs).toBeLessThanOrEqual(algorithm === 'sliding-window' ? 2 * HOUR : HOUR);
    }
  });
});

describe('overdrafts and script calls on Redis', () => {
  it.each(['redis', 'cluster'] as const)('on %s: one overdraft is clamped to the capacity in what Redis stores', async (store) => {
    const client = store === 'redis' ? redis : clusterClient;
    for (const algorithm of ['fixed-window', 'sliding-log'] as const) {
      const key = tracker();
      const p: RateLimitPolicy = { algorithm, limit: 10, window: '1h', name: 'cap' };
      await (await limiters[store].reserve(p, key, { cost: 1 })).settle(1_000_000);
      const stateKey = `${PREFIX}:{by%3A${key}}:svc:cap:${algorithm === 'fixed-window' ? 'fw' : 'sl'}`;
      const stored = algorithm === 'fixed-window' ? Number(await client.get(stateKey)) : await client.zcard(stateKey);
      expect({ algorithm, stored }).toEqual({ algorithm, stored: 11 });
      expect(await client.pttl(stateKey)).toBeGreaterThan(0);
    }
  });

  it.each(['redis', 'cluster'] as const)('on %s: a sliding log holds at most twice its limit, however many overdraw', async (store) => {
    const client = store === 'redis' ? redis : clusterClient;
    const key = tracker();
    const p: RateLimitPolicy = { algorithm: 'sliding-log', limit: 10, window: '1h', name: 'many' };
    const reservations = await Promise.all([1, 2, 3, 4, 5].map(() => limiters[store].reserve(p, key, { cost: 1 })));
    for (const r of reservations) await r.settle(1_000);
    expect(await client.zcard(`${PREFIX}:{by%3A${key}}:svc:many:sl`)).toBe(20);
  });

  it('settling two policies of one tracker is one script call', async () => {
    const key = tracker();
    const perMinute: RateLimitPolicy = { name: 'minute', algorithm: 'sliding-window', limit: 2_000, window: '1m' };
    const perDay: RateLimitPolicy = { name: 'day', algorithm: 'gcra', limit: 50_000, window: '1d' };
    const r = await limiters.redis.reserve([perMinute, perDay], key, { cost: 1_500 });
    expect(r.decisions.map((d) => d.remaining)).toEqual([500, 48_500]);
    await redis.config('RESETSTAT');
    await r.settle(1_700);
    const stats = await redis.info('commandstats');
    const calls = [...stats.matchAll(/cmdstat_(?:evalsha|eval):calls=(\d+)/g)].reduce((n, m) => n + Number(m[1]), 0);
    expect(calls).toBe(1);
    expect((await limiters.redis.peek(perMinute, key)).remaining).toBe(300);
    expect((await limiters.redis.peek(perDay, key)).remaining).toBe(48_300);
  });
});

/** Redis's clock, ms. */
async function redisNow(client: Redis | Cluster): Promise<number> {
  const [s, us] = await (client as Redis).time();
  return Number(s) * 1_000 + Math.floor(Number(us) / 1_000);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(ms, 0)));

describe.each(['redis', 'cluster'] as const)('a settlement after the window rolled over, on %s (real time)', (store) => {
  const W = 2_000;

  /** Sleeps until `offset` ms past the start of the next window (on Redis's clock). */
  async function untilNextWindow(offset: number): Promise<void> {
    const now = await redisNow(store === 'redis' ? redis : clusterClient);
    await sleep(W - (now % W) + offset);
  }

  /** Reserves 6 of 10 early in a window, lets `gapMs` pass, consumes `others`, then settles at 0. */
  async function rolledOver(algorithm: RateLimitAlgorithmName, gapMs: number, others: number): Promise<number> {
    const limiter = limiters[store];
    const p: RateLimitPolicy = { algorithm, limit: 10, window: W, name: 'roll' };
    const key = tracker();
    await untilNextWindow(50);
    const r = await limiter.reserve(p, key, { cost: 6 });
    await sleep(gapMs);
    await limiter.consume(p, key, { cost: others });
    await r.settle(0);
    return (await limiter.peek(p, key)).remaining;
  }

  it('fixed-window and sliding-log give nothing back; sliding-window gives back from the previous window only', async () => {
    // fixed-window: into the next window; sliding-log: past the entries' age. Either way the 6 are gone and
    // the 3 taken since must stay (10 left would mean the give-back took them).
    // sliding-window: halfway into the next window, where the 6 still weigh; 1 taken since: giving back from
    // the previous window's count leaves 9 (from this window's, 7 or 8).
    const [fixed, log, sliding] = await Promise.all([
      rolledOver('fixed-window', W, 3),
      rolledOver('sliding-log', W + 100, 3),
      rolledOver('sliding-window', W + W / 2 - 50, 1),
    ]);
    expect({ fixed, log, sliding }).toEqual({ fixed: 7, log: 7, sliding: 9 });
  }, 20_000);
});
