/**
 * Decisions per second without HTTP: each of our algorithms (RateLimiterService on the Redis store) against
 * rate-limiter-flexible's RateLimiterRedis (and, for the rejected hot key, its in-memory block), with a
 * plain ioredis INCR as the floor; plus the in-process stores (ours and RateLimiterMemory) for scale.
 * Closed loop: `concurrency` callers each await one decision then start the next, for a fixed time.
 * Every client is ioredis with auto-pipelining, the same for every library.
 *
 *   npm run bench:decisions      (BENCH_ROUNDS, BENCH_DECISION_MS, BENCH_ONLY, BENCH_QUICK)
 */
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, type RateLimiterAbstract } from 'rate-limiter-flexible';
import { MemoryStore, RateLimitAlgorithmRegistry, RateLimitEngine, RateLimiterService, RedisStore } from '../lib';
import type { RateLimitAlgorithmName, RateLimitDecision, RateLimitPolicy, RateLimitStore } from '../lib';
import { createStore } from '../lib/stores/create-store';
import { benchRedis } from './support/redis';
import { fmtMicros, fmtRate, fmtRatio, fmtRatios, heading, median, percentileSorted, table } from './support/report';
import { selected, settings } from './support/settings';
import { RATE_LIMIT_ALGORITHMS } from '../lib/interfaces/policy.interface';

const ALGORITHMS = RATE_LIMIT_ALGORITHMS;
const CONCURRENCIES = [1, 64, 256];
const KEY_COUNT = 10_000;
/** Allow-all limit: never reached within a run (limit × window stays under the 2^50 the engine accepts). */
const BIG = 1_000_000_000;
const WINDOW_S = 60;
const RLF = 'rlf RateLimiterRedis';
const RLF_BLOCK = 'rlf RateLimiterRedis + inMemoryBlock';
const RLF_MEMORY = 'rlf RateLimiterMemory';
const BARE_STORE = 'fixed-window, bare RedisStore (no resilience, no shedding)';

type Scenario = 'keys' | 'hot-allow' | 'hot-reject';
const SCENARIOS: Record<Scenario, string> = {
  keys: '10k keys, allowing',
  'hot-allow': 'One hot key, allowing',
  'hot-reject': 'One hot key, rejecting',
};

/** One contender: how to build its decision function for a scenario's limit. */
interface Variant {
  name: string;
  /** Only run in these scenarios (all when absent). */
  scenarios?: Scenario[];
  /** Builds a fresh decider for `limit` (state is flushed between cells). */
  make(limit: number): (key: string) => Promise<unknown>;
}

interface Cell {
  ops: number;
  perSec: number;
  p50: number;
  p99: number;
  /** CPU time per decision, µs: this Node process, and the Redis server (INFO cpu). Steadier than rates. */
  nodeCpuUs: number;
  redisCpuUs: number;
}

/** Redis server CPU seconds (user + sys) so far. */
async function redisCpu(client: Redis): Promise<number> {
  const info = String(await client.info('cpu'));
  const read = (field: string) => Number(new RegExp(`${field}:([\\d.]+)`).exec(info)?.[1] ?? NaN);
  return read('used_cpu_user') + read('used_cpu_sys');
}

/** Decisions answered by the store-error fallback instead of Redis (should stay 0: they would flatter us). */
let fallbacks = 0;

/** Counted in the timed loop for every variant alike (a promise of our own per decision would tax ours only). */
function countFallback(answer: unknown): void {
  if ((answer as Partial<RateLimitDecision> | undefined)?.reason === 'store-unavailable') fallbacks++;
}

/** `concurrency` callers in a closed loop for `ms`; every decision timed. Rejections are answers, not errors. */
async function runCell(
  admin: Redis,
  decide: (key: string) => Promise<unknown>,
  keys: readonly string[],
  concurrency: number,
  ms: number,
): Promise<Cell> {
  const latencies: number[] = [];
  let next = 0;
  let deadline = Infinity;
  const caller = async () => {
    while (performance.now() < deadline) {
      const key = keys[next++ % keys.length];
      const t0 = performance.now();
      countFallback(await decide(key));
      latencies.push(performance.now() - t0);
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
    ops,
    perSec: (ops * 1000) / elapsed,
    p50: percentileSorted(sorted, 50),
    p99: percentileSorted(sorted, 99),
    nodeCpuUs: (cpu.user + cpu.system) / ops,
    redisCpuUs: (redisSeconds * 1e6) / ops,
  };
}

/** rate-limiter-flexible rejects with a RateLimiterRes (not an Error) when limited: an answer. */
function rlfDecider(limiter: RateLimiterAbstract): (key: string) => Promise<unknown> {
  return (key) =>
    limiter.consume(key).catch((res: unknown) => {
      if (res instanceof Error) throw res;
      return res;
    });
}

function variants(ours: Redis, rlfClient: Redis, incrClient: Redis): Variant[] {
  const registry = new RateLimitAlgorithmRegistry();
  // What RateLimitModule builds for a client of yours: RedisStore behind ResilientStore (deadline, fallback)
  // and SheddingStore (hot-key shedding). A long deadline: a stalled box must not turn decisions into
  // fallbacks that never reach Redis.
  const redisStack = createStore({ redis: ours, storeTimeoutMs: 10_000 }, registry);
  const bareRedisStore = new RedisStore(ours, registry.all(), false);
  const service = (store: RateLimitStore) => new RateLimiterService(new RateLimitEngine(store), registry, { prefix: 'rl' });
  const policy = (algorithm: RateLimitAlgorithmName, limit: number): RateLimitPolicy => ({ algorithm, limit, window: WINDOW_S * 1000 });
  const list: Variant[] = [
    { name: 'ioredis INCR (floor)', make: () => (key) => incrClient.incr(`incr:${key}`) },
    { name: RLF, make: (points) => rlfDecider(new RateLimiterRedis({ storeClient: rlfClient, points, duration: WINDOW_S })) },
    {
      name: RLF_BLOCK,
      scenarios: ['hot-reject'],
      make: (points) =>
        rlfDecider(
          new RateLimiterRedis({
            storeClient: rlfClient,
            points,
            duration: WINDOW_S,
            inMemoryBlockOnConsumed: points + 1,
            inMemoryBlockDuration: WINDOW_S,
          }),
        ),
    },
  ];
  for (const algorithm of ALGORITHMS) {
    list.push({
      name: algorithm,
      make: (limit) => {
        const svc = service(redisStack);
        const p = policy(algorithm, limit);
        return (key) => svc.consume(p, key);
      },
    });
  }
  list.push({
    name: BARE_STORE,
    make: (limit) => {
      const svc = service(bareRedisStore);
      const p = policy('fixed-window', limit);
      return (key) => svc.consume(p, key);
    },
  });
  list.push({ name: RLF_MEMORY, make: (points) => rlfDecider(new RateLimiterMemory({ points, duration: WINDOW_S })) });
  for (const algorithm of ['fixed-window', 'gcra'] as const) {
    list.push({
      name: `memory store: ${algorithm}`,
      make: (limit) => {
        const svc = service(new MemoryStore({ maxKeys: 1_000_000 }));
        const p = policy(algorithm, limit);
        return (key) => svc.consume(p, key);
      },
    });
  }
  return list.filter((v) => selected(v.name));
}

async function main(): Promise<void> {
  const redis = await benchRedis();
  const client = () => new Redis({ port: redis.port, enableAutoPipelining: true });
  const clients = [client(), client(), client(), new Redis({ port: redis.port })];
  const [ours, rlfClient, incrClient, admin] = clients;
  try {
    const list = variants(ours, rlfClient, incrClient);
    const keysOf: Record<Scenario, string[]> = {
      keys: Array.from({ length: KEY_COUNT }, (_, i) => `user${i}`),
      'hot-allow': ['hot'],
      'hot-reject': ['hot'],
    };
    const results = new Map<string, Cell[]>();
    const id = (scenario: Scenario, concurrency: number, name: string) => `${scenario}|${concurrency}|${name}`;

    // JIT warm-up of every code path before anything is timed.
    for (const v of list) await runCell(admin, v.make(BIG), keysOf.keys, 64, Math.min(200, settings.decisionMs));

    for (let round = 0; round < settings.rounds; round++) {
      for (const scenario of Object.keys(SCENARIOS) as Scenario[]) {
        for (const concurrency of CONCURRENCIES) {
          for (const v of list) {
            if (v.scenarios && !v.scenarios.includes(scenario)) continue;
            await admin.flushall();
            const limit = scenario === 'hot-reject' ? 1 : BIG;
            const decide = v.make(limit);
            // A rejecting hot key is over its limit (and, for the in-memory block, already blocked) before timing.
            if (scenario === 'hot-reject') for (let i = 0; i < 3; i++) await decide('hot');
            const cell = await runCell(admin, decide, keysOf[scenario], concurrency, settings.decisionMs);
            results.set(id(scenario, concurrency, v.name), [...(results.get(id(scenario, concurrency, v.name)) ?? []), cell]);
          }
        }
      }
      process.stderr.write(`decisions: round ${round + 1}/${settings.rounds} done\n`);
    }
    report(list, results, id);
  } finally {
    for (const c of clients) c.disconnect();
    await redis.stop();
  }
}

function report(list: readonly Variant[], results: Map<string, Cell[]>, id: (s: Scenario, c: number, n: string) => string): void {
  heading('Decisions/s without HTTP', {
    rounds: settings.rounds,
    cellMs: settings.decisionMs,
    keys: KEY_COUNT,
    note: 'median decisions/s of rounds (× rate-limiter-flexible RateLimiterRedis, median of same-round ratios); latency = p50 / p99 per decision, medians of rounds',
  });
  const ratioTo = (scenario: Scenario, concurrency: number, name: string, base: string): number[] => {
    const own = results.get(id(scenario, concurrency, name)) ?? [];
    const ref = results.get(id(scenario, concurrency, base)) ?? [];
    return own.map((cell, i) => cell.perSec / (ref[i]?.perSec ?? NaN));
  };
  for (const scenario of Object.keys(SCENARIOS) as Scenario[]) {
    console.log(`\n### ${SCENARIOS[scenario]}\n`);
    const rows = list
      .filter((v) => !v.scenarios || v.scenarios.includes(scenario))
      .map((v) => {
        const base = v.name.startsWith('memory store') ? RLF_MEMORY : RLF;
        const perConcurrency = CONCURRENCIES.map((c) => {
          const cells = results.get(id(scenario, c, v.name)) ?? [];
          return `${fmtRate(median(cells.map((x) => x.perSec)))} (${fmtRatio(median(ratioTo(scenario, c, v.name, base)))})`;
        });
        const latency = CONCURRENCIES.map((c) => {
          const cells = results.get(id(scenario, c, v.name)) ?? [];
          return `${fmtMicros(median(cells.map((x) => x.p50)))} / ${fmtMicros(median(cells.map((x) => x.p99)))}`;
        });
        const c64 = results.get(id(scenario, 64, v.name)) ?? [];
        const cpu = `${median(c64.map((x) => x.nodeCpuUs)).toFixed(1)} / ${median(c64.map((x) => x.redisCpuUs)).toFixed(1)}`;
        return [v.name, ...perConcurrency, ...latency, cpu];
      });
    const header = [
      'variant',
      ...CONCURRENCIES.map((c) => `c=${c} dec/s`),
      ...CONCURRENCIES.map((c) => `c=${c} p50 / p99`),
      'c=64 CPU µs/dec node / redis',
    ];
    console.log(table(header, rows));
  }
  console.log(
    `\nOur variants go through the module's store stack (RedisStore + ResilientStore + SheddingStore); decisions answered by a fallback instead of Redis: ${fallbacks}.`,
  );
  console.log('\n### Targets (per-round ratios in this run)\n');
  const targets: string[][] = [];
  for (const algorithm of ALGORITHMS) {
    if (!list.some((v) => v.name === algorithm)) continue;
    const goal = algorithm === 'fixed-window' || algorithm === 'gcra' ? 1.2 : 1.0;
    const ratios = ratioTo('keys', 64, algorithm, RLF);
    targets.push([`${algorithm} vs ${RLF}, 10k keys, c=64`, `≥ ${goal.toFixed(1)}×`, fmtRatios(ratios), verdict(median(ratios), goal)]);
  }
  for (const algorithm of ALGORITHMS) {
    if (!list.some((v) => v.name === algorithm)) continue;
    const ratios = ratioTo('hot-reject', 64, algorithm, RLF_BLOCK);
    targets.push([`${algorithm} vs ${RLF_BLOCK}, hot key rejecting, c=64`, '≥ 1.0×', fmtRatios(ratios), verdict(median(ratios), 1)]);
  }
  console.log(table(['target', 'goal', 'median (rounds)', 'met'], targets));
}

function verdict(value: number, goal: number): string {
  if (!Number.isFinite(value)) return 'n/a';
  return value >= goal ? 'yes' : 'no';
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
