/**
 * Bounded state. The memory store keeps at most `maxKeys` keys whatever the number of distinct trackers;
 * on Redis, every key the library writes carries a TTL (nothing is left to live forever).
 */
import { Redis } from 'ioredis';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import type { RateLimitModuleOptions } from '../../lib/interfaces/module-options.interface';
import type { RateLimitAlgorithmName, RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { RATE_LIMIT_ALGORITHMS } from '../../lib/interfaces/policy.interface';
import { RateLimitEngine } from '../../lib/pipeline/rate-limit.engine';
import { RateLimiterService } from '../../lib/rate-limiter.service';
import { MemoryStore } from '../../lib/stores/memory/memory.store';
import type { RateLimitCall } from '../../lib/stores/store.interface';
import { compilePolicy } from '../../lib/policy/compile-policy';
import { trackerKeyPrefix } from '../../lib/shared/keys';
import { libraryClient, startRedis, type RedisProcess } from '../support/redis-server';
import { serviceOver } from '../support/store-chain';

const ALGORITHMS = RATE_LIMIT_ALGORITHMS;
const registry = new RateLimitAlgorithmRegistry();

describe('memory store bound', () => {
  it('1,000,000 distinct trackers (all seven algorithms, lockouts too) never hold more than maxKeys = 10,000 keys', () => {
    const MAX = 10_000;
    let clock = 1_700_000_000_000;
    const store = new MemoryStore({ maxKeys: MAX, clock: () => clock });
    const templates = ALGORITHMS.map((algorithm) => {
      const compiled = compilePolicy({ algorithm, limit: 1, window: '1h', blockFor: '1h' }, registry, 'test', 'svc');
      return { compiled, params: compiled.staticParams! };
    });
    let peak = 0;
    let allowed = 0;
    for (let i = 0; i < 1_000_000; i++) {
      const { compiled, params } = templates[i % templates.length];
      const base = trackerKeyPrefix('rl', `t${i}`);
      const call: RateLimitCall = {
        algorithm: compiled.algorithm,
        params,
        // Every 10th tracker asks for more than it may, so the policy rejects and writes a lockout key too.
        cost: i % 10 === 0 ? 2 : 1,
        blockForMs: compiled.blockForMs,
        stateKey: base + compiled.stateKeySuffix,
        blockKey: base + compiled.blockKeySuffix,
        token: compiled.algorithm.name === 'concurrency' ? `lease${i}` : '',
        fallback: 'fail-open',
        refundable: false,
      };
      if (store.decideSync([call], 'consume').allowed) allowed++;
      if (store.size > peak) peak = store.size;
      if (i % 1000 === 0) clock += 1;
    }
    console.log(`memory store: 1,000,000 trackers, ${allowed} admitted, peak ${peak} keys, final ${store.size} keys (maxKeys ${MAX})`);
    expect(peak).toBeLessThanOrEqual(MAX);
    expect(store.size).toBeLessThanOrEqual(MAX);
    expect(allowed).toBe(900_000);
  });

  it('evicts the least recently used, not the tracker in active use', async () => {
    let clock = 1_700_000_000_000;
    const store = new MemoryStore({ maxKeys: 100, clock: () => clock });
    const compiled = compilePolicy({ algorithm: 'fixed-window', limit: 3, window: '1h' }, registry, 'test', 'svc');
    const engine = new RateLimitEngine(store);
    const req = [{ compiled, params: compiled.staticParams!, cost: 1 }];
    const hot = trackerKeyPrefix('rl', 'hot');
    expect((await engine.decide(hot, req, 'consume')).decisions[0].remaining).toBe(2);
    for (let i = 0; i < 10_000; i++) {
      await engine.decide(trackerKeyPrefix('rl', `cold${i}`), req, 'consume');
      if (i % 50 === 0) expect((await engine.decide(hot, req, 'peek')).decisions[0].remaining).toBe(2);
      clock += 1;
    }
    expect(store.size).toBeLessThanOrEqual(100);
    expect((await engine.decide(hot, req, 'consume')).decisions[0].remaining).toBe(1);
  });
});

describe('every Redis key has a TTL', () => {
  let redis: RedisProcess | undefined;
  let admin: Redis | undefined;
  let service: RateLimiterService | undefined;
  let close: (() => Promise<void>) | undefined;

  beforeAll(async () => {
    redis = await startRedis();
    admin = new Redis(redis.url, { maxRetriesPerRequest: 1 });
    const client = await libraryClient(redis.url);
    const options: RateLimitModuleOptions = { redis: client, prefix: 'ttlcheck', storeTimeoutMs: 2_000, onStoreError: 'fail-closed' };
    const { svc, store } = serviceOver(options, registry);
    service = svc;
    close = async () => {
      await store.close();
      client.disconnect();
    };
  }, 30_000);

  afterAll(async () => {
    await close?.();
    admin?.disconnect();
    await redis?.stop();
  });

  it('after a mixed workload (all algorithms, multi-policy, lockouts, block, refunds, leases, tricky trackers), SCAN finds only keys with PTTL > 0', async () => {
    const svc = service!;
    const trackers = ['u1', 'a:b', '{x}', 'line\nbreak', '😀', 'k'.repeat(5_000), 'ip:10.0.0.1', 'by:10.0.0.1'];
    const window = '10m';
    const byAlg = (algorithm: RateLimitAlgorithmName, extra: Partial<RateLimitPolicy> = {}): RateLimitPolicy => ({
      algorithm,
      limit: 3,
      window,
      name: `p-${algorithm}`,
      ...extra,
    });
    const plain = ALGORITHMS.map((a) => byAlg(a));
    const blocking = ALGORITHMS.filter((a) => a !== 'concurrency').map((a) => byAlg(a, { name: `b-${a}`, blockFor: '5m' }));
    const counting = ALGORITHMS.filter((a) => a !== 'concurrency').map((a) => byAlg(a, { name: `c-${a}`, countOnly: 'failed' }));
    const multi: RateLimitPolicy[] = [
      { algorithm: 'fixed-window', limit: 5, window: '1m', name: 'm1' },
      { algorithm: 'gcra', limit: 4, window: '30s', name: 'm2' },
      { algorithm: 'sliding-log', limit: 6, window: '2m', name: 'm3', blockFor: '1m' },
      { algorithm: 'concurrency', limit: 2, window: '1m', name: 'm4' },
    ];
    let decisions = 0;
    let unavailable = 0;
    const seen = (reason: string | undefined) => {
      decisions++;
      if (reason === 'store-unavailable') unavailable++;
    };

    for (const tracker of trackers) {
      for (const p of [...plain, ...blocking, ...counting]) {
        for (let i = 0; i < 5; i++) seen((await svc.consume(p, tracker)).reason);
        seen((await svc.peek(p, tracker)).reason);
      }
      for (const p of counting) await svc.refund(p, tracker, 2);
      for (let i = 0; i < 8; i++) (await svc.consumeAll(multi, tracker)).decisions.forEach((d) => seen(d.reason));
      const lease = await svc.lease({ algorithm: 'concurrency', limit: 2, window: '1m', name: 'lease' }, tracker);
      seen(lease.decision.reason);
      await lease.release();
      await svc.block(byAlg('token-bucket', { name: 'manual' }), tracker, '2m');
      seen((await svc.consume(byAlg('token-bucket', { name: 'manual' }), tracker)).reason);
      await svc.reset(plain[0], tracker);
      seen((await svc.consume(plain[0], tracker)).reason);
    }
    expect(unavailable).toBe(0);

    const keys: string[] = [];
    let cursor = '0';
    do {
      const [next, batch] = await admin!.scan(cursor, 'MATCH', 'ttlcheck:*', 'COUNT', 1_000);
      cursor = next;
      keys.push(...batch);
    } while (cursor !== '0');
    expect(await admin!.dbsize()).toBe(keys.length);
    const pipeline = admin!.pipeline();
    for (const key of keys) pipeline.pttl(key);
    const ttls = ((await pipeline.exec()) ?? []).map(([error, ttl]) => {
      if (error) throw error;
      return ttl as number;
    });
    const without = keys.filter((_, i) => !(ttls[i] > 0));
    console.log(
      `TTL scan: ${decisions} decisions, ${keys.length} keys under the prefix, ${without.length} without a TTL; longest PTTL ${Math.max(...ttls)} ms`,
    );
    expect(keys.length).toBeGreaterThan(trackers.length * ALGORITHMS.length);
    expect(without).toEqual([]);
    // Nothing outlives what it must remember: at most two of the longest window (sliding-window keeps the
    // previous window's count), 10 min here.
    const longest = keys[ttls.indexOf(Math.max(...ttls))];
    expect([longest, Math.max(...ttls)]).toEqual([expect.stringMatching(/:s$/), expect.any(Number)]);
    expect(Math.max(...ttls)).toBeLessThanOrEqual(2 * 10 * 60_000);
    for (let i = 0; i < keys.length; i++) if (!keys[i].endsWith(':s')) expect([keys[i], ttls[i] <= 10 * 60_000]).toEqual([keys[i], true]);
  }, 60_000);
});
