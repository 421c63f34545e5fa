/**
 * Atomicity under load on a real Redis: many concurrent consumes on one key admit exactly `limit`, for every
 * counting algorithm — from one process (several connections, auto-pipelined) and from four separate Node
 * processes sharing the server (the "in-process counters with a mutex" flaw: right on one machine, wrong with two).
 * Windows are long (1e9 ms) so no refill, leak, rollover or lease expiry happens during the test. Every test runs
 * once per client library (ioredis, node-redis, Valkey GLIDE), with the same assertions.
 */
import { Redis } from 'ioredis';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import type { RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { RATE_LIMIT_ALGORITHMS } from '../../lib/interfaces/policy.interface';
import { RateLimitEngine } from '../../lib/pipeline/rate-limit.engine';
import { RateLimiterService } from '../../lib/rate-limiter.service';
import { RedisStore } from '../../lib/stores/redis/redis.store';
import type { RedisClient } from '../../lib/interfaces/client-types';
import { REDIS_CLIENTS } from '../support/redis-clients';
import { startRedis, type RedisProcess } from '../support/redis-server';
import { runWorkers } from '../support/workers';

const ALGORITHMS = RATE_LIMIT_ALGORITHMS;
const LIMIT = 50;
const WINDOW_MS = 1_000_000_000;

const registry = new RateLimitAlgorithmRegistry();
let redis: RedisProcess;
let admin: Redis;

beforeAll(async () => {
  redis = await startRedis();
  admin = new Redis({ port: redis.port });
}, 30_000);

afterAll(async () => {
  admin?.disconnect();
  await redis?.stop();
});

/** Every key of the server with its type and TTL. */
async function keysWithTtl(): Promise<Array<{ key: string; type: string; pttl: number }>> {
  const keys = (await admin.keys('*')).sort();
  return Promise.all(keys.map(async (key) => ({ key, type: await admin.type(key), pttl: await admin.pttl(key) })));
}

describe.each(REDIS_CLIENTS)('$name', (kind) => {
  const clients: RedisClient[] = [];
  const services: RateLimiterService[] = [];

  beforeAll(async () => {
    for (let i = 0; i < 4; i++) {
      const client = await kind.connect(redis.port);
      clients.push(client);
      services.push(new RateLimiterService(new RateLimitEngine(new RedisStore(client, registry.all(), false)), registry, { prefix: 'rl' }));
    }
  }, 30_000);

  afterAll(async () => {
    for (const client of clients) await kind.close(client);
  });

  describe('one process: 300 concurrent consumes with limit 50 admit exactly 50', () => {
    test.each(ALGORITHMS)('%s', async (algorithm) => {
      const policy: RateLimitPolicy = { algorithm, limit: LIMIT, window: WINDOW_MS, name: 'race' };
      const key = `${kind.name}-one-process-${algorithm}`;
      // Spread over four connections: the race is between connections, not only inside one pipeline.
      const decisions = await Promise.all(Array.from({ length: 300 }, (_, i) => services[i % 4].consume(policy, key)));
      const admitted = decisions.filter((d) => d.allowed);
      expect(admitted).toHaveLength(LIMIT);
      expect(decisions.filter((d) => !d.allowed)).toHaveLength(250);
      // Each admitted call saw a distinct remaining count: 49, 48, ..., 0.
      expect(admitted.map((d) => d.remaining).sort((a, b) => a - b)).toEqual(Array.from({ length: LIMIT }, (_, i) => i));
      for (const d of decisions) if (!d.allowed) expect(d.remaining).toBe(0);

      const after = await services[0].peek(policy, key);
      expect(after.allowed).toBe(false);
      expect(after.remaining).toBe(0);

      const stateKey = (await admin.keys(`rl:{by%3A${key}}:*`)).filter((k) => !k.endsWith(':b'));
      expect(stateKey).toHaveLength(1);
      if (algorithm === 'sliding-log' || algorithm === 'concurrency') expect(await admin.zcard(stateKey[0])).toBe(LIMIT);
      // fixed-window keeps its window's count, sliding-window "<window>:<count>:<previous count>".
      if (algorithm === 'fixed-window') expect(await admin.get(stateKey[0])).toBe(String(LIMIT));
      if (algorithm === 'sliding-window') expect((await admin.get(stateKey[0]))?.split(':')[1]).toBe(String(LIMIT));
      const pttl = await admin.pttl(stateKey[0]);
      expect(pttl).toBeGreaterThan(0);
    });

    test('two keys never interfere: 300 calls split over 2 keys admit exactly 50 each', async () => {
      const policy: RateLimitPolicy = { algorithm: 'sliding-log', limit: LIMIT, window: WINDOW_MS, name: 'pair' };
      const decisions = await Promise.all(
        Array.from({ length: 300 }, (_, i) => services[i % 4].consume(policy, `${kind.name}-pair-${i % 2}`)),
      );
      expect(decisions.filter((d, i) => d.allowed && i % 2 === 0)).toHaveLength(LIMIT);
      expect(decisions.filter((d, i) => d.allowed && i % 2 === 1)).toHaveLength(LIMIT);
    });
  });

  describe('four Node processes sharing one Redis: 4 × 75 concurrent consumes admit exactly 50 in total', () => {
    test('every algorithm', async () => {
      const env = {
        REDIS_PORT: String(redis.port),
        ALGORITHMS: ALGORITHMS.join(','),
        LIMIT: String(LIMIT),
        WINDOW_MS: String(WINDOW_MS),
        CALLS: '75',
        KEY: `${kind.name}-four-processes`,
        CLIENT: kind.name,
      };
      const results = await runWorkers([env, env, env, env]);
      expect(results).toHaveLength(4);
      for (const algorithm of ALGORITHMS) {
        const perWorker = results.map((r) => r.allowed[algorithm]);
        expect({ algorithm, total: perWorker.reduce((a, b) => a + b, 0) }).toEqual({ algorithm, total: LIMIT });
      }
      // Every key the workers (and the tests above) wrote carries a TTL.
      expect((await keysWithTtl()).filter(({ pttl }) => pttl < 0)).toEqual([]);
    }, 60_000);
  });
});
