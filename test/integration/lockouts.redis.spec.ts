/**
 * Escalating lockouts (`blockFor` + `escalate`): the n-th lockout since the last forgiveness lasts
 * min(blockFor × factor^(n−1), max), the count is forgotten once `forgiveAfter` has passed since the end of
 * the last lockout, all in the decision's own script call. Exact on the memory store (fake clock, both sides
 * of every boundary); on a real Redis and a 3-node Cluster the lengths are exact too (each is reported by
 * the call that starts it), while the waits between offences take real time with slack on the safe side.
 * Also: `block()` never shortens a lockout in force, `unblock()` forgets the count, `reset()` everything.
 */
import type { Cluster, Redis } from 'ioredis';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import { RateLimitConfigError } from '../../lib/errors/rate-limit-config.error';
import type { RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { RateLimitEngine } from '../../lib/pipeline/rate-limit.engine';
import { RateLimiterService } from '../../lib/rate-limiter.service';
import { createStore } from '../../lib/pipeline/create-store';
import { RedisStore } from '../../lib/stores/redis/redis.store';
import { sleep } from '../e2e/harness';
import { memoryHarness } from '../support/memory-harness';
import {
  libraryClient,
  libraryCluster,
  startRedis,
  startRedisCluster,
  type RedisClusterProcess,
  type RedisProcess,
} from '../support/redis-server';

const registry = new RateLimitAlgorithmRegistry();

/** One unit per 200 ms: two calls in a row exhaust it, and its own wait (≤ 200 ms) never outlasts a lockout. */
const escalating = (forgiveAfter: number): RateLimitPolicy => ({
  algorithm: 'gcra',
  limit: 1,
  window: 200,
  name: 'login',
  blockFor: 200,
  escalate: { factor: 2, max: 1_000, forgiveAfter },
});

/** An offence: one allowed call, then the rejected one that starts a lockout. */
async function offend(limiter: RateLimiterService, policy: RateLimitPolicy, key: string) {
  expect(await limiter.consume(policy, key)).toMatchObject({ allowed: true });
  return limiter.consume(policy, key);
}

describe('escalating lockouts on the memory store (exact)', () => {
  it('doubles each lockout up to the cap: 200, 400, 800, 1000, 1000 ms', async () => {
    const { limiter, advance } = memoryHarness();
    const p = escalating(10_000);
    const lengths: number[] = [];
    for (let i = 0; i < 5; i++) {
      const d = await offend(limiter, p, 'ann');
      expect(d).toMatchObject({ allowed: false, reason: 'blocked', remaining: 0 });
      expect(d.resetMs).toBe(d.retryAfterMs);
      expect(d.moreQuotaMs).toBe(d.retryAfterMs);
      lengths.push(d.retryAfterMs);
      advance(d.retryAfterMs - 1);
      expect(await limiter.consume(p, 'ann')).toMatchObject({ allowed: false, reason: 'blocked', retryAfterMs: 1 });
      advance(1);
    }
    expect(lengths).toEqual([200, 400, 800, 1_000, 1_000]);
  });

  it('factor 3: 200, 600, 1000 (capped)', async () => {
    const { limiter, advance } = memoryHarness();
    const p: RateLimitPolicy = { ...escalating(10_000), escalate: { factor: 3, max: 1_000, forgiveAfter: 10_000 } };
    const lengths: number[] = [];
    for (let i = 0; i < 3; i++) {
      const d = await offend(limiter, p, 'ann');
      lengths.push(d.retryAfterMs);
      advance(d.retryAfterMs);
    }
    expect(lengths).toEqual([200, 600, 1_000]);
  });

  it('forgives once forgiveAfter has passed since the end of the last lockout, not a millisecond before', async () => {
    const { limiter, advance } = memoryHarness();
    const p = escalating(5_000);
    expect((await offend(limiter, p, 'ann')).retryAfterMs).toBe(200);
    advance(200 + 4_999);
    expect((await offend(limiter, p, 'ann')).retryAfterMs).toBe(400);
    advance(400 + 5_000);
    expect((await offend(limiter, p, 'ann')).retryAfterMs).toBe(200);
    advance(200);
    // The count starts over from the forgiven one.
    expect((await offend(limiter, p, 'ann')).retryAfterMs).toBe(400);
  });

  it('counts each tracker on its own, and a peek or a penalty starts no lockout', async () => {
    const { limiter, advance } = memoryHarness();
    const p = escalating(10_000);
    expect((await offend(limiter, p, 'ann')).retryAfterMs).toBe(200);
    advance(200);
    expect((await offend(limiter, p, 'ann')).retryAfterMs).toBe(400);
    expect((await offend(limiter, p, 'bob')).retryAfterMs).toBe(200);
    advance(400);
    await limiter.penalty(p, 'ann', 1);
    const peeked = await limiter.peek(p, 'ann');
    expect(peeked).toMatchObject({ allowed: false, retryAfterMs: 200 });
    expect(peeked.reason).toBeUndefined();
    advance(200);
    expect((await offend(limiter, p, 'ann')).retryAfterMs).toBe(800);
  });
});

describe('block, unblock and reset with escalation (memory store, exact)', () => {
  it('block never shortens a lockout in force, and lengthens it when asked for longer', async () => {
    const { limiter, advance } = memoryHarness();
    const p = escalating(10_000);
    await offend(limiter, p, 'ann');
    advance(50);
    await limiter.block(p, 'ann', 100);
    expect((await limiter.consume(p, 'ann')).retryAfterMs).toBe(150);
    await limiter.block(p, 'ann', 150);
    expect((await limiter.consume(p, 'ann')).retryAfterMs).toBe(150);
    await limiter.block(p, 'ann', 1_000);
    expect((await limiter.consume(p, 'ann')).retryAfterMs).toBe(1_000);
    advance(1_000);
    // The block kept the offence count (one) and added none: the next lockout is the second.
    expect((await offend(limiter, p, 'ann')).retryAfterMs).toBe(400);
  });

  it('block never shortens a plain lockout either; unblock then block shortens it', async () => {
    const { limiter } = memoryHarness();
    const p: RateLimitPolicy = { algorithm: 'fixed-window', limit: 5, window: '1m', name: 'p' };
    await limiter.block(p, 'ann', '1h');
    await limiter.block(p, 'ann', '1m');
    expect((await limiter.consume(p, 'ann')).retryAfterMs).toBe(3_600_000);
    await limiter.unblock(p, 'ann');
    await limiter.block(p, 'ann', '1m');
    expect((await limiter.consume(p, 'ann')).retryAfterMs).toBe(60_000);
  });

  it('a block on a concurrency policy locks it out too (its lease id is not kept as a note)', async () => {
    const { limiter } = memoryHarness();
    const p: RateLimitPolicy = { algorithm: 'concurrency', limit: 2, window: '1m', name: 'c' };
    await limiter.block(p, 'ann', 5_000);
    expect(await limiter.consume(p, 'ann')).toMatchObject({ allowed: false, reason: 'blocked', retryAfterMs: 5_000 });
  });

  it('unblock lifts the lockout and forgets the count', async () => {
    const { limiter, advance } = memoryHarness();
    const p = escalating(10_000);
    await offend(limiter, p, 'ann');
    advance(200);
    expect((await offend(limiter, p, 'ann')).retryAfterMs).toBe(400);
    await limiter.unblock(p, 'ann');
    advance(200);
    expect((await offend(limiter, p, 'ann')).retryAfterMs).toBe(200);
  });

  it('reset forgets the counter, the lockout and the count', async () => {
    const { limiter, advance } = memoryHarness();
    const p = escalating(10_000);
    await offend(limiter, p, 'ann');
    advance(200);
    await offend(limiter, p, 'ann');
    await limiter.reset(p, 'ann');
    expect((await offend(limiter, p, 'ann')).retryAfterMs).toBe(200);
  });
});

describe('escalate validation', () => {
  const { limiter } = memoryHarness();
  const base: RateLimitPolicy = { algorithm: 'gcra', limit: 1, window: '1s', name: 'p' };
  const cases: Array<[string, Partial<RateLimitPolicy>, string]> = [
    [
      'without blockFor',
      { escalate: { max: '1h', forgiveAfter: '1d' } },
      "RateLimiterService: escalate: needs blockFor, the first lockout's length (for example blockFor: '1m'); later lockouts grow from it.",
    ],
    [
      'a factor of 1',
      { blockFor: '1m', escalate: { factor: 1, max: '1h', forgiveAfter: '1d' } },
      'RateLimiterService: escalate.factor: 1 must be a whole number from 2 to 1000.',
    ],
    [
      'a fractional factor',
      { blockFor: '1m', escalate: { factor: 2.5, max: '1h', forgiveAfter: '1d' } },
      'RateLimiterService: escalate.factor: 2.5 must be a whole number from 2 to 1000.',
    ],
    [
      'max below blockFor',
      { blockFor: '1m', escalate: { max: '30s', forgiveAfter: '1d' } },
      'RateLimiterService: escalate.max: 30000 ms must be at least blockFor (60000 ms).',
    ],
    [
      'no max',
      { blockFor: '1m', escalate: { forgiveAfter: '1d' } as never },
      "RateLimiterService: escalate.max: is required: the longest lockout, for example '1h'.",
    ],
    [
      'no forgiveAfter',
      { blockFor: '1m', escalate: { max: '1h' } as never },
      "RateLimiterService: escalate.forgiveAfter: is required: how long after a lockout ends its offences are forgotten, for example '1d'.",
    ],
    [
      'a bad forgiveAfter',
      { blockFor: '1m', escalate: { max: '1h', forgiveAfter: 'soon' as never } },
      `RateLimiterService: escalate.forgiveAfter: "soon" is not a valid duration; use a positive whole number of milliseconds or a string such as '250ms', '1s', '1m', '1h', '1d'.`,
    ],
    [
      'a max past 100 years',
      { blockFor: '1m', escalate: { max: '40000d', forgiveAfter: '1d' } },
      'RateLimiterService: escalate.max: 3456000000000 ms is longer than 100 years (3155760000000 ms), the longest supported.',
    ],
    [
      'an unknown field',
      { blockFor: '1m', escalate: { max: '1h', forgiveAfter: '1d', cap: '1h' } as never },
      "RateLimiterService: escalate: unknown field 'cap'; known fields are factor, max, forgiveAfter.",
    ],
    [
      'not an object',
      { blockFor: '1m', escalate: 2 as never },
      "RateLimiterService: escalate: 2 must be an object such as { max: '1h', forgiveAfter: '1d' }.",
    ],
  ];

  it.each(cases)('rejects %s, naming the field', async (_, extra, message) => {
    const error = await limiter.consume({ ...base, ...extra }, 'k').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RateLimitConfigError);
    expect((error as Error).message).toBe(message);
  });
});

/** The same offences against a real store: each lockout's length is exact; the waits between them are real. */
let trackers = 0;
const tracker = () => `lock-${process.pid}-${++trackers}`;

function realStoreScenarios(name: string, limiterOf: () => RateLimiterService, redis: () => Redis | Cluster) {
  describe(name, () => {
    it('doubles each lockout up to the cap (200, 400, 800, 1000 ms), the count and its TTL in the block key', async () => {
      const limiter = limiterOf();
      const p = escalating(3_000);
      const key = tracker();
      const lengths: number[] = [];
      for (let i = 0; i < 4; i++) {
        const d = await offend(limiter, p, key);
        expect(d).toMatchObject({ allowed: false, reason: 'blocked', remaining: 0 });
        expect(d.resetMs).toBe(d.retryAfterMs);
        lengths.push(d.retryAfterMs);
        const [blockKey] = await keysOf(redis(), key, ':b');
        expect(await redis().get(blockKey)).toMatch(new RegExp(`^\\d{13}:${i + 1}$`));
        const ttl = await redis().pttl(blockKey);
        expect(ttl).toBeLessThanOrEqual(d.retryAfterMs + 3_000);
        expect(ttl).toBeGreaterThan(d.retryAfterMs + 3_000 - 500);
        // The next offence comes just after this lockout's end, well within forgiveAfter (3 s).
        await sleep(d.retryAfterMs + 20);
      }
      expect(lengths).toEqual([200, 400, 800, 1_000]);
    });

    it('forgives after a quiet forgiveAfter, then counts again from the first lockout', async () => {
      const limiter = limiterOf();
      const p = escalating(300);
      const key = tracker();
      expect((await offend(limiter, p, key)).retryAfterMs).toBe(200);
      await sleep(200 + 300 + 50);
      expect((await offend(limiter, p, key)).retryAfterMs).toBe(200);
      await sleep(200 + 20);
      expect((await offend(limiter, p, key)).retryAfterMs).toBe(400);
    });

    it('block keeps the offence count and never shortens the lockout in force', async () => {
      const limiter = limiterOf();
      const p = escalating(3_000);
      const key = tracker();
      expect((await offend(limiter, p, key)).retryAfterMs).toBe(200);
      const [lockout] = await keysOf(redis(), key, ':b');
      const before = await redis().get(lockout);
      await limiter.block(p, key, 100);
      // Not shortened: the 200 ms lockout's end stays as it was (no wall-clock margin: a busy box may take 100 ms here).
      expect(await redis().get(lockout)).toBe(before);
      await limiter.block(p, key, 600);
      const left = (await limiter.peek(p, key)).retryAfterMs;
      expect(left).toBeGreaterThan(500);
      expect(left).toBeLessThanOrEqual(600);
      const [blockKey] = await keysOf(redis(), key, ':b');
      expect(await redis().get(blockKey)).toMatch(/^\d{13}:1$/);
      expect(await redis().pttl(blockKey)).toBeGreaterThan(3_000);
      await sleep(left + 20);
      expect((await offend(limiter, p, key)).retryAfterMs).toBe(400);
    });

    it('a plain lockout keeps its plain value; block never shortens it', async () => {
      const limiter = limiterOf();
      const p: RateLimitPolicy = { algorithm: 'fixed-window', limit: 1, window: '1h', name: 'plain', blockFor: '2h' };
      const key = tracker();
      await limiter.consume(p, key);
      expect(await limiter.consume(p, key)).toMatchObject({ allowed: false, reason: 'blocked', retryAfterMs: 7_200_000 });
      const [blockKey] = await keysOf(redis(), key, ':b');
      expect(await redis().get(blockKey)).toMatch(/^\d{13}$/);
      await limiter.block(p, key, '1m');
      const left = (await limiter.peek(p, key)).retryAfterMs;
      expect(left).toBeGreaterThan(7_200_000 - 1_000);
      await limiter.unblock(p, key);
      await limiter.block(p, key, '1m');
      expect((await limiter.peek(p, key)).retryAfterMs).toBeLessThanOrEqual(60_000);
    });
  });
}

/**
 * The keys of service key `key` (the tracker `by:<key>`) whose names end with `suffix` (a cluster's are on the
 * node of the tracker's slot).
 */
async function keysOf(redis: Redis | Cluster, key: string, suffix: string): Promise<string[]> {
  const pattern = `rl:{by%3A${key}}:*`;
  const nodes = 'nodes' in redis ? redis.nodes('master') : [redis];
  const found = (await Promise.all(nodes.map((node) => node.keys(pattern)))).flat();
  return found.filter((k) => k.endsWith(suffix));
}

describe('escalating lockouts on a real Redis', () => {
  let server: RedisProcess;
  let client: Redis;

  beforeAll(async () => {
    server = await startRedis();
    client = await libraryClient(server.url);
  }, 30_000);

  afterAll(async () => {
    client?.disconnect();
    await server?.stop();
  });

  realStoreScenarios(
    'the Redis store',
    () => new RateLimiterService(new RateLimitEngine(new RedisStore(client, registry.all(), false)), registry, { prefix: 'rl' }),
    () => client,
  );
  // The module's own store: shedding over resilient over Redis (a remembered rejection must not hide a lockout's growth).
  realStoreScenarios(
    "the module's store",
    () => new RateLimiterService(new RateLimitEngine(createStore({ redis: client, prefix: 'rl' }, registry)), registry, { prefix: 'rl' }),
    () => client,
  );

  it('gives the same lengths as the memory twin for the same offences', async () => {
    const limiter = new RateLimiterService(new RateLimitEngine(new RedisStore(client, registry.all(), false)), registry, { prefix: 'rl' });
    const memory = memoryHarness();
    const p: RateLimitPolicy = { ...escalating(60_000), escalate: { factor: 3, max: 1_000, forgiveAfter: 60_000 } };
    const key = tracker();
    const redisLengths: number[] = [];
    const memoryLengths: number[] = [];
    for (let i = 0; i < 3; i++) {
      const d = await offend(limiter, p, key);
      redisLengths.push(d.retryAfterMs);
      memoryLengths.push((await offend(memory.limiter, p, key)).retryAfterMs);
      memory.advance(d.retryAfterMs);
      await sleep(d.retryAfterMs + 20);
    }
    expect(redisLengths).toEqual([200, 600, 1_000]);
    expect(memoryLengths).toEqual(redisLengths);
  });
});

describe('escalating lockouts on a 3-node Redis Cluster', () => {
  let cluster: RedisClusterProcess;
  let client: Cluster;

  beforeAll(async () => {
    cluster = await startRedisCluster(3);
    client = await libraryCluster(cluster.startupNodes);
  }, 60_000);

  afterAll(async () => {
    client?.disconnect();
    await cluster?.stop();
  });

  realStoreScenarios(
    'the Redis store on a Cluster',
    () => new RateLimiterService(new RateLimitEngine(new RedisStore(client, registry.all(), false)), registry, { prefix: 'rl' }),
    () => client,
  );
});
