/**
 * `RateLimiterService.penalty(policy, key, cost)`: charges whatever the counter says, in one store call, and
 * reports what a peek of one unit sees after the charge. Exact on the memory store (fake clock at a window
 * boundary); on a real Redis the same numbers, where time passing between calls cannot change them.
 */
import { Redis } from 'ioredis';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import { RateLimitConfigError } from '../../lib/errors/rate-limit-config.error';
import type { RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { RateLimitEngine } from '../../lib/pipeline/rate-limit.engine';
import { RateLimiterService } from '../../lib/rate-limiter.service';
import { createStore } from '../../lib/pipeline/create-store';
import { RedisStore } from '../../lib/stores/redis/redis.store';
import { memoryHarness } from '../support/memory-harness';
import { startRedis, type RedisProcess } from '../support/redis-server';

const registry = new RateLimitAlgorithmRegistry();
const policy = (algorithm: RateLimitPolicy['algorithm']): RateLimitPolicy => ({ algorithm, limit: 5, window: '10s', name: 'p' });

/** After penalty(3) then penalty(5) at a window's start (8 units on a limit of 5): when one unit fits again. */
const RETRY_AFTER_8: Record<string, number> = {
  // the window's end
  'fixed-window': 10_000,
  // halfway into the next window the previous 8 weigh 4: one more fits
  'sliding-window': 15_000,
  // the 4th oldest of 8 entries leaves the window
  'sliding-log': 10_000,
  // 4 units refill at one per 2 s
  'token-bucket': 8_000,
  gcra: 8_000,
  'leaky-bucket': 8_000,
};
const ALGORITHMS = Object.keys(RETRY_AFTER_8) as Array<RateLimitPolicy['algorithm']>;

describe.each(ALGORITHMS)('penalty on the memory store: %s', (algorithm) => {
  it('charges past the limit and reports exact remaining and retry after', async () => {
    const { limiter, advance } = memoryHarness();
    const p = policy(algorithm);
    expect(await limiter.penalty(p, 'k', 3)).toMatchObject({ allowed: true, remaining: 2, retryAfterMs: 0 });
    const after = await limiter.penalty(p, 'k', 5);
    expect(after).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: RETRY_AFTER_8[algorithm] });
    expect(await limiter.consume(p, 'k')).toMatchObject({ allowed: false, retryAfterMs: RETRY_AFTER_8[algorithm] });
    advance(RETRY_AFTER_8[algorithm] - 1);
    expect((await limiter.peek(p, 'k')).allowed).toBe(false);
    advance(1);
    expect(await limiter.consume(p, 'k')).toMatchObject({ allowed: true });
  });

  it('defaults to one unit and is exactly what a consume would have charged', async () => {
    const a = memoryHarness();
    const b = memoryHarness();
    const p = policy(algorithm);
    const penalized = await a.limiter.penalty(p, 'k');
    const consumed = await b.limiter.consume(p, 'k');
    expect(penalized).toEqual({ ...consumed, delayMs: consumed.delayMs === undefined ? undefined : 0 });
    expect(penalized.remaining).toBe(4);
  });
});

describe('penalty validation', () => {
  const { limiter } = memoryHarness();

  it.each([0, -1, 1.5, 6, Number.NaN])('rejects cost %p, naming the bound', async (cost) => {
    const error = await limiter.penalty(policy('gcra'), 'k', cost).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RateLimitConfigError);
    expect((error as Error).message).toBe(
      `penalty: cost: ${String(cost)} must be a whole number from 1 to 5 (the burst of policy 'p'; for longer, use block()).`,
    );
  });

  it('rejects a concurrency policy', async () => {
    await expect(limiter.penalty({ algorithm: 'concurrency', limit: 2, window: '1m', name: 'c' }, 'k')).rejects.toThrow(
      "penalty: policy 'c' uses 'concurrency', which takes leases; penalties need a counter.",
    );
  });
});

describe('penalty on a real Redis', () => {
  let redis: RedisProcess;
  let client: Redis;
  let trackers = 0;
  const tracker = () => `pen-${process.pid}-${++trackers}`;

  beforeAll(async () => {
    redis = await startRedis();
    client = new Redis({ port: redis.port });
    await client.ping();
  }, 30_000);

  afterAll(async () => {
    client?.disconnect();
    await redis?.stop();
  });

  /** Script runs that completed since the last RESETSTAT (a NOSCRIPT answer is not one). */
  async function scriptCalls(): Promise<number> {
    const stats = await client.info('commandstats');
    let calls = 0;
    for (const m of stats.matchAll(/cmdstat_(?:evalsha|eval):calls=(\d+)/g)) calls += Number(m[1]);
    return calls;
  }

  const services = () => ({
    'redis store': new RateLimiterService(new RateLimitEngine(new RedisStore(client, registry.all(), false)), registry, { prefix: 'rl' }),
    // The module's own store: shedding over resilient over Redis.
    'module store': new RateLimiterService(new RateLimitEngine(createStore({ redis: client, prefix: 'rl' }, registry)), registry, {
      prefix: 'rl',
    }),
  });

  it.each(ALGORITHMS)('%s: charges past the limit, one script call, every key with a TTL', async (algorithm) => {
    for (const [name, limiter] of Object.entries(services())) {
      const p = policy(algorithm);
      const key = tracker();
      await client.config('RESETSTAT');
      // The wait counts from the first charge, so time runs from before it.
      const started = Date.now();
      expect(await limiter.penalty(p, key, 3)).toMatchObject({ allowed: true, remaining: 2, retryAfterMs: 0 });
      expect({ name, scriptCalls: await scriptCalls() }).toEqual({ name, scriptCalls: 1 });
      const d = await limiter.penalty(p, key, 5);
      expect(d).toMatchObject({ allowed: false, remaining: 0 });
      // Redis's clock is not aligned to the window: exact for the buckets, bounded for the windows.
      const spent = Date.now() - started + 2;
      if (algorithm === 'token-bucket' || algorithm === 'gcra' || algorithm === 'leaky-bucket') {
        expect(d.retryAfterMs).toBeGreaterThanOrEqual(8_000 - spent);
        expect(d.retryAfterMs).toBeLessThanOrEqual(8_000);
      } else {
        expect(d.retryAfterMs).toBeGreaterThan(0);
        expect(d.retryAfterMs).toBeLessThanOrEqual(algorithm === 'sliding-window' ? 20_000 : 10_000);
      }
      expect((await limiter.consume(p, key)).allowed).toBe(false);
      const keys = await client.keys(`rl:*${key}*`);
      expect(keys.length).toBeGreaterThan(0);
      for (const k of keys) expect(await client.pttl(k)).toBeGreaterThan(0);
    }
  });

  it('gcra: the same exact numbers as the memory twin when no time passes', async () => {
    const { limiter } = memoryHarness();
    const redisLimiter = services()['redis store'];
    const p: RateLimitPolicy = { algorithm: 'gcra', limit: 10, window: '1h', burst: 4, name: 'g' };
    const key = tracker();
    const [mem, red] = [await limiter.penalty(p, key, 4), await redisLimiter.penalty(p, key, 4)];
    expect(red).toMatchObject({ allowed: false, remaining: 0, limit: 4 });
    // one unit refills every 360 s; a millisecond or two may pass on Redis
    expect(mem.retryAfterMs).toBe(360_000);
    expect(red.retryAfterMs).toBeGreaterThanOrEqual(359_990);
    expect(red.retryAfterMs).toBeLessThanOrEqual(360_000);
  });
});
