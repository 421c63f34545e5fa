/**
 * Memory: Redis `MEMORY USAGE` of one tracker's key per algorithm (and of the peers' keys, for scale), the
 * `used_memory` growth per tracker over 10k trackers (adds Redis's dict and expiry entries), and the memory
 * store's heap bytes per tracker over 100k trackers, and the heap bytes per deny an instance holds with 100k denies in
 * force on Redis (MAX_DENIES). Needs --expose-gc (the npm script passes it).
 *
 *   npm run bench:memory
 */
import { serviceTracker } from '../lib/http/tracker';
import { trackerKeyPrefix } from '../lib/shared/keys';
import { createHash } from 'node:crypto';
import { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis } from 'rate-limiter-flexible';
import { ThrottlerStorageService } from '@nestjs/throttler';
import { ThrottlerStorageRedisService } from '@nest-lab/throttler-storage-redis';
import { RateLimiterService } from '../lib';
import { MemoryStore } from '../lib/stores/memory/memory.store';
import { RateLimitAlgorithmRegistry } from '../lib/algorithms/algorithm.registry';
import { RateLimitEngine } from '../lib/pipeline/rate-limit.engine';
import { RedisStore } from '../lib/stores/redis/redis.store';
import type { RateLimitAlgorithmName, RateLimitPolicy } from '../lib';
import { benchRedis } from './support/redis';
import { heading, table } from './support/report';
import { RATE_LIMIT_ALGORITHMS } from '../lib/interfaces/policy.interface';
import { MAX_DENIES } from '../lib/stores/deny-bounds';
import type { OverrideKeys } from '../lib/stores/store.interface';

const ALGORITHMS = RATE_LIMIT_ALGORITHMS;
const LIMIT = 100;
const WINDOW_MS = 60_000;
const REDIS_TRACKERS = 10_000;
const HEAP_TRACKERS = 100_000;
const BATCH = 500;
const FROZEN_NOW = Date.now();

const policyOf = (algorithm: RateLimitAlgorithmName): RateLimitPolicy => ({ algorithm, limit: LIMIT, window: WINDOW_MS });
/** The key @nestjs/throttler's guard builds for a tracker: a sha256 of class, handler, throttler name and tracker. */
const throttlerKey = (tracker: string) => createHash('sha256').update(`BenchController-hello-default-${tracker}`).digest('hex');

/** Runs `fn(i)` for i in [0, n), `BATCH` at a time (auto-pipelined). */
async function times(n: number, fn: (i: number) => Promise<unknown>): Promise<void> {
  for (let i = 0; i < n; i += BATCH) {
    await Promise.all(Array.from({ length: Math.min(BATCH, n - i) }, (_, j) => fn(i + j)));
  }
}

async function usedMemory(client: Redis): Promise<number> {
  const info = String(await client.info('memory'));
  return Number(/used_memory:(\d+)/.exec(info)![1]);
}

async function memoryUsage(client: Redis, pattern: string): Promise<number> {
  const keys = await client.keys(pattern);
  let total = 0;
  for (const key of keys) total += Number(await client.memory('USAGE', key, 'SAMPLES', 0));
  return total;
}

interface RedisContender {
  name: string;
  /** One decision for `tracker`. */
  hit(tracker: string): Promise<unknown>;
  /** Pattern of the state key(s) of tracker 'probe'. */
  pattern: string;
}

async function redisPart(port: number): Promise<void> {
  const client = new Redis({ port, enableAutoPipelining: true });
  const registry = new RateLimitAlgorithmRegistry();
  const service = new RateLimiterService(new RateLimitEngine(new RedisStore(client, registry.all(), false)), registry, { prefix: 'rl' });
  const rlf = new RateLimiterRedis({ storeClient: client, points: LIMIT, duration: WINDOW_MS / 1000 });
  const throttler = new ThrottlerStorageRedisService(client);
  const contenders: RedisContender[] = [
    ...ALGORITHMS.map((algorithm) => ({
      name: algorithm,
      hit: (t: string) => service.consume(policyOf(algorithm), t),
      // The keys of service key 'probe' as the library writes them (a tracker in the `by:` namespace, encoded).
      pattern: `${trackerKeyPrefix('rl', serviceTracker('probe', 64))}*`,
    })),
    { name: 'rate-limiter-flexible RateLimiterRedis', hit: (t: string) => rlf.consume(t).catch((r: unknown) => r), pattern: 'rlflx:probe' },
    {
      name: '@nest-lab/throttler-storage-redis',
      hit: (t: string) => throttler.increment(throttlerKey(t), WINDOW_MS, LIMIT, WINDOW_MS, 'default'),
      pattern: `{${throttlerKey('probe')}:*`,
    },
  ];
  const rows: string[][] = [];
  try {
    for (const c of contenders) {
      await client.flushall();
      await c.hit('probe');
      const one = await memoryUsage(client, c.pattern);
      for (let i = 1; i < LIMIT; i++) await c.hit('probe');
      const full = await memoryUsage(client, c.pattern);
      await client.flushall();
      const before = await usedMemory(client);
      await times(REDIS_TRACKERS, (i) => c.hit(`user${i}`));
      // Per live key: bucket states expire once refilled (600 ms here), so some trackers may be gone already.
      const perKey = ((await usedMemory(client)) - before) / (await client.dbsize());
      rows.push([c.name, String(one), String(full), perKey.toFixed(0)]);
    }
  } finally {
    client.disconnect();
  }
  console.log(`### Redis, per tracker (limit ${LIMIT}, window ${WINDOW_MS / 1000}s)\n`);
  console.log(
    table(
      [
        'contender',
        'MEMORY USAGE after 1 hit (B)',
        `after ${LIMIT} hits (B)`,
        `used_memory growth / live key, ${REDIS_TRACKERS / 1000}k trackers (B)`,
      ],
      rows,
    ),
  );
}

async function heapUsed(): Promise<number> {
  const gc = (globalThis as { gc?: () => void }).gc!;
  for (let i = 0; i < 3; i++) {
    gc();
    await new Promise((r) => setImmediate(r));
  }
  return process.memoryUsage().heapUsed;
}

/** Heap growth per tracker after one decision each for HEAP_TRACKERS trackers; the contender is kept alive. */
async function heapPerTracker(make: () => (tracker: string) => unknown): Promise<number> {
  const trackers = Array.from({ length: HEAP_TRACKERS }, (_, i) => `user${i}`);
  const before = await heapUsed();
  const hit = make();
  for (let i = 0; i < HEAP_TRACKERS; i += BATCH) await Promise.all(trackers.slice(i, i + BATCH).map((t) => hit(t)));
  const after = await heapUsed();
  void hit; // keep the store reachable until measured
  return (after - before) / HEAP_TRACKERS;
}

async function heapPart(): Promise<void> {
  const registry = new RateLimitAlgorithmRegistry();
  const rows: string[][] = [];
  const keep: unknown[] = [];
  for (const algorithm of ALGORITHMS) {
    const bytes = await heapPerTracker(() => {
      // A frozen clock: nothing expires while the trackers are added (bucket states live 600 ms here).
      const store = new MemoryStore({ maxKeys: HEAP_TRACKERS * 2, clock: () => FROZEN_NOW });
      const service = new RateLimiterService(new RateLimitEngine(store), registry, { prefix: 'rl' });
      keep.push(store);
      const policy = policyOf(algorithm);
      return (t) => service.consume(policy, t);
    });
    rows.push([`memory store: ${algorithm}`, bytes.toFixed(0)]);
  }
  rows.push([
    'rate-limiter-flexible RateLimiterMemory',
    (
      await heapPerTracker(() => {
        const limiter = new RateLimiterMemory({ points: LIMIT, duration: WINDOW_MS / 1000 });
        keep.push(limiter);
        return (t) => limiter.consume(t).catch((r: unknown) => r);
      })
    ).toFixed(0),
  ]);
  rows.push([
    '@nestjs/throttler ThrottlerStorageService (one hit)',
    (
      await heapPerTracker(() => {
        const storage = new ThrottlerStorageService();
        keep.push(storage);
        return (t) => storage.increment(throttlerKey(t), WINDOW_MS, LIMIT, WINDOW_MS, 'default');
      })
    ).toFixed(0),
  ]);
  for (const k of keep) if (k instanceof ThrottlerStorageService) k.onApplicationShutdown();
  console.log(`\n### In-process stores: heap bytes per tracker (one decision each for ${HEAP_TRACKERS / 1000}k trackers, after GC)\n`);
  console.log(table(['store', 'heap B / tracker'], rows));
}

/**
 * Heap bytes per deny an instance on Redis holds (every deny in force, read by its poll) at MAX_DENIES denies,
 * trackers `user:<i>`, without a reason and with a 24-character one.
 */
async function denyListPart(port: number): Promise<void> {
  const client = new Redis({ port, lazyConnect: false });
  const registry = new RateLimitAlgorithmRegistry();
  const rows: string[][] = [];
  try {
    for (const reason of ['', '|credential stuffing, 50x']) {
      const prefix = `denies${reason.length}`;
      const store = new RedisStore(client, registry.all(), false);
      const tag = `${prefix}:{overrides}`;
      // The keys the overrides' poll names (override-sync.ts).
      const keys: OverrideKeys = {
        overrides: tag,
        version: `${tag}:v`,
        expiries: `${tag}:until`,
        instances: `${tag}:instances`,
        denies: {
          seq: `${tag}:denies:seq`,
          denies: `${tag}:denies`,
          log: `${tag}:denies:log`,
          ends: `${tag}:denies:until`,
          carryOver: `${tag}:denies:carry-over`,
        },
      };
      const until = Date.now() + 3_600_000;
      for (let i = 0; i < MAX_DENIES; i += 5_000) {
        const entries = Array.from(
          { length: 5_000 },
          (_, j) => [`${trackerKeyPrefix(prefix, `user:${i + j}`)}deny`, `${until}${reason}`] as const,
        );
        await store.writeDenies(keys, { op: 'import', since: '0', entries });
      }
      // No 1.0 deny key to carry over here: the reader's first poll starts none.
      await client.set(keys.denies!.carryOver, 'done');
      const reader = new RateLimitEngine(store, { prefix });
      const before = await heapUsed();
      await reader.overrides.refresh();
      const after = await heapUsed();
      if (!reader.denials.active) throw new Error('the deny list read no deny');
      rows.push([reason === '' ? 'no reason' : `reason of ${reason.length - 1} characters`, ((after - before) / MAX_DENIES).toFixed(0)]);
      await client.del(keys.denies!.denies, keys.denies!.log, keys.denies!.ends, keys.denies!.seq, keys.denies!.carryOver);
    }
  } finally {
    client.disconnect();
  }
  console.log(`\n### Deny list: heap bytes per deny an instance holds (${MAX_DENIES / 1000}k denies in force on Redis, after GC)\n`);
  console.log(table(['denies', 'heap B / deny'], rows));
}

async function main(): Promise<void> {
  if (typeof (globalThis as { gc?: unknown }).gc !== 'function') {
    throw new Error('bench/memory.ts needs --expose-gc: run it with `npm run bench:memory`.');
  }
  heading('Memory', { limit: LIMIT, windowSeconds: WINDOW_MS / 1000 });
  const redis = await benchRedis();
  try {
    await redisPart(redis.port);
    await denyListPart(redis.port);
  } finally {
    await redis.stop();
  }
  await heapPart();
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
