/**
 * Decisions per second by Redis client library: the module's store stack (createStore: RedisStore behind
 * ResilientStore and SheddingStore, `batchDecisions` on) around an ioredis, a node-redis 5 and a Valkey GLIDE 2
 * client of yours, `fixed-window` on 10k keys, concurrency 1 and 64 (closed loop: each caller awaits one
 * decision, then starts the next). The clients take turns in every round (interleaved); each round's rate is
 * divided by ioredis's in the same round, and the table shows the median of those ratios.
 *
 *   TS_NODE_SWC=true node -r ts-node/register/transpile-only bench/clients.ts   (BENCH_ROUNDS, BENCH_DECISION_MS, BENCH_ONLY)
 *
 * Clients as an app sets them up: ioredis as the module creates it from a URL (as in bench/decisions.ts), node-redis
 * with `disableOfflineQueue` (as the README asks), GLIDE with a `requestTimeout` as long as the store deadline (its default, 250 ms, would
 * turn decisions of a stalled box into fallbacks, which would flatter it).
 */
import { performance } from 'node:perf_hooks';
import { GlideClient } from '@valkey/valkey-glide';
import { Redis } from 'ioredis';
import { OWNED_CLIENT_DEFAULTS } from '../lib/pipeline/create-store';
import { createClient } from 'redis';
import { RateLimiterService } from '../lib';
import { RateLimitAlgorithmRegistry } from '../lib/algorithms/algorithm.registry';
import { RateLimitEngine } from '../lib/pipeline/rate-limit.engine';
import type { RateLimitDecision, RateLimitModuleOptions, RateLimitPolicy } from '../lib';
import type { RateLimitStore } from '../lib/stores/store.interface';
import { createStore } from '../lib/pipeline/create-store';
import type { RedisClient } from '../lib/interfaces/client-types';
import { benchRedis } from './support/redis';
import { fmtMicros, fmtRate, fmtRatios, heading, median, percentileSorted, table } from './support/report';
import { selected, settings } from './support/settings';

const CONCURRENCIES = [1, 64];
const KEY_COUNT = 10_000;
const DEADLINE_MS = 10_000;
const policy: RateLimitPolicy = { algorithm: 'fixed-window', limit: 1_000_000_000, window: '1m' };

/** One client library: its client, and a closer. */
interface Variant {
  name: string;
  client: RedisClient;
  close(): Promise<void>;
}

interface Cell {
  perSec: number;
  p50: number;
  p99: number;
  nodeCpuUs: number;
  redisCpuUs: number;
  fallbacks: number;
}

async function variants(port: number): Promise<Variant[]> {
  const list: Variant[] = [];
  if (selected('ioredis')) {
    const client = new Redis({ ...OWNED_CLIENT_DEFAULTS, port });
    list.push({ name: 'ioredis', client, close: async () => client.disconnect() });
  }
  if (selected('node-redis')) {
    const client = await createClient({ url: `redis://127.0.0.1:${port}`, disableOfflineQueue: true }).connect();
    list.push({ name: 'node-redis', client, close: async () => client.destroy() });
  }
  if (selected('GLIDE')) {
    const client = await GlideClient.createClient({ addresses: [{ host: '127.0.0.1', port }], requestTimeout: DEADLINE_MS });
    list.push({ name: 'GLIDE', client, close: async () => client.close() });
  }
  return list;
}

/** Redis server CPU seconds (user + sys) so far. */
async function redisCpu(admin: Redis): Promise<number> {
  const info = String(await admin.info('cpu'));
  const read = (field: string) => Number(new RegExp(`${field}:([\\d.]+)`).exec(info)?.[1] ?? NaN);
  return read('used_cpu_user') + read('used_cpu_sys');
}

/** `concurrency` callers in a closed loop for `ms` through `svc`; every decision timed. */
async function runCell(admin: Redis, svc: RateLimiterService, keys: readonly string[], concurrency: number, ms: number): Promise<Cell> {
  const latencies: number[] = [];
  let next = 0;
  let fallbacks = 0;
  let deadline = Infinity;
  const caller = async () => {
    while (performance.now() < deadline) {
      const t0 = performance.now();
      const d: RateLimitDecision = await svc.consume(policy, keys[next++ % keys.length]);
      latencies.push(performance.now() - t0);
      if (d.reason === 'store-unavailable') fallbacks++;
    }
  };
  const cpu0 = process.cpuUsage();
  const redis0 = await redisCpu(admin);
  const start = performance.now();
  deadline = start + ms;
  await Promise.all(Array.from({ length: concurrency }, caller));
  const elapsed = performance.now() - start;
  const cpu = process.cpuUsage(cpu0);
  const redisSeconds = (await redisCpu(admin)) - redis0;
  const ops = latencies.length;
  const sorted = Float64Array.from(latencies).sort();
  return {
    perSec: (ops * 1000) / elapsed,
    p50: percentileSorted(sorted, 50),
    p99: percentileSorted(sorted, 99),
    nodeCpuUs: (cpu.user + cpu.system) / ops,
    redisCpuUs: (redisSeconds * 1e6) / ops,
    fallbacks,
  };
}

async function main(): Promise<void> {
  const redis = await benchRedis();
  const admin = new Redis({ port: redis.port });
  const list = await variants(redis.port);
  const registry = new RateLimitAlgorithmRegistry();
  const stores: RateLimitStore[] = [];
  const services = new Map(
    list.map((v) => {
      const options: RateLimitModuleOptions = { redis: v.client, storeTimeoutMs: DEADLINE_MS, prefix: 'rl' };
      const store = createStore(options, registry);
      stores.push(store);
      return [v.name, new RateLimiterService(new RateLimitEngine(store, options), registry, options)] as const;
    }),
  );
  const keys = Array.from({ length: KEY_COUNT }, (_, i) => `user${i}`);
  const results = new Map<string, Cell[]>();
  const id = (concurrency: number, name: string) => `${concurrency}|${name}`;
  try {
    // JIT warm-up of every client's path before anything is timed.
    for (const v of list) await runCell(admin, services.get(v.name)!, keys, 64, Math.min(300, settings.decisionMs));
    for (let round = 0; round < settings.rounds; round++) {
      for (const concurrency of CONCURRENCIES) {
        for (const v of list) {
          await admin.flushall();
          const cell = await runCell(admin, services.get(v.name)!, keys, concurrency, settings.decisionMs);
          results.set(id(concurrency, v.name), [...(results.get(id(concurrency, v.name)) ?? []), cell]);
        }
      }
      process.stderr.write(`clients: round ${round + 1}/${settings.rounds} done\n`);
    }
    report(list, results, id);
  } finally {
    for (const store of stores) await store.close();
    for (const v of list) await v.close();
    admin.disconnect();
    await redis.stop();
  }
}

function report(list: readonly Variant[], results: Map<string, Cell[]>, id: (c: number, n: string) => string): void {
  heading('Decisions/s by Redis client (fixed-window, module store stack)', {
    rounds: settings.rounds,
    cellMs: settings.decisionMs,
    keys: KEY_COUNT,
    note: 'median decisions/s of rounds (× ioredis: median of same-round ratios, per-round ratios in brackets); latency p50 / p99; CPU µs per decision at c=64',
  });
  const rows = list.map((v) => {
    const cells = (c: number) => results.get(id(c, v.name)) ?? [];
    const ratios = (c: number) => cells(c).map((cell, i) => cell.perSec / (results.get(id(c, 'ioredis'))?.[i]?.perSec ?? NaN));
    return [
      v.name,
      ...CONCURRENCIES.flatMap((c) => [fmtRate(median(cells(c).map((x) => x.perSec))), fmtRatios(ratios(c))]),
      ...CONCURRENCIES.map((c) => `${fmtMicros(median(cells(c).map((x) => x.p50)))} / ${fmtMicros(median(cells(c).map((x) => x.p99)))}`),
      `${median(cells(64).map((x) => x.nodeCpuUs)).toFixed(1)} / ${median(cells(64).map((x) => x.redisCpuUs)).toFixed(1)}`,
    ];
  });
  const header = [
    'client',
    ...CONCURRENCIES.flatMap((c) => [`c=${c} dec/s`, `c=${c} × ioredis`]),
    ...CONCURRENCIES.map((c) => `c=${c} p50 / p99`),
    'c=64 CPU µs/dec node / redis',
  ];
  console.log(table(header, rows));
  const fallbacks = [...results.values()].flat().reduce((sum, cell) => sum + cell.fallbacks, 0);
  console.log(`\nDecisions answered by a fallback instead of Redis: ${fallbacks} (must be 0).`);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
