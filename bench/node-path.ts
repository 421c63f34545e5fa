/**
 * Node's own cost of a decision, with Redis taken out: `RateLimiterService.consume` through the module's store
 * stack (and through a bare RedisStore), its script calls answered by a canned reply on the next turn instead of a
 * server. What is left is this library's work per decision (service, engine, layers, dispatcher, codec) and its
 * garbage, without ioredis's, the socket's or Redis's, so it moves only with our code. Each run is a process of
 * its own: V8 settles in one of two regimes per process (see bench/README.md, "Node's two regimes"), so the
 * runs are listed one by one with how much each young-generation collection had to keep.
 *
 *   npm run bench:node-path      (BENCH_NODE_RUNS runs per stack, default 6; BENCH_DECISION_MS per run, default 1500;
 *                                BENCH_NODE_FLAGS extra flags for the runs' node, e.g. --min-semi-space-size=16)
 */
import { spawnSync } from 'node:child_process';
import { Redis } from 'ioredis';
import { RateLimitAlgorithmRegistry } from '../lib/algorithms/algorithm.registry';
import { createStore, OWNED_CLIENT_DEFAULTS } from '../lib/pipeline/create-store';
import { RateLimitEngine } from '../lib/pipeline/rate-limit.engine';
import { StoreLayer } from '../lib/pipeline/store-layer';
import { RateLimiterService } from '../lib/rate-limiter.service';
import type { RateLimitStore } from '../lib/stores/store.interface';
import { RedisStore } from '../lib/stores/redis/redis.store';
import { benchRedis } from './support/redis';
import { heading, median, table } from './support/report';

const KEYS = 10_000;
const CONCURRENCY = 64;
const STACKS = ['module stack', 'bare RedisStore'] as const;
type Stack = (typeof STACKS)[number];

interface Run {
  usPerDecision: number;
  decisionsPerSec: number;
  /** Median bytes a young-generation collection kept (copied or promoted), from V8's --trace-gc-nvp lines. */
  survivedPerScavenge: number;
}

/** The RedisStore at the bottom of a stack of layers. */
function redisStoreOf(store: RateLimitStore): RedisStore {
  let s: RateLimitStore = store;
  while (s instanceof StoreLayer) s = (s as unknown as { inner: RateLimitStore }).inner;
  if (!(s instanceof RedisStore)) throw new Error('bench: no RedisStore at the bottom of the stack');
  return s;
}

/** One run, in this process: prints a JSON line with decisions and CPU µs. */
async function worker(port: number, stack: Stack, ms: number): Promise<void> {
  const client = new Redis({ port, ...OWNED_CLIENT_DEFAULTS });
  await new Promise((resolve) => client.once('ready', resolve));
  const registry = new RateLimitAlgorithmRegistry();
  const full = createStore({ redis: client, storeTimeoutMs: 10_000 }, registry);
  const redis = redisStoreOf(full);
  // Every batch is answered on the next turn with what decide.lua replies to allowed one-policy decisions.
  const dispatcher = (redis as unknown as { dispatcher: { transport: { evalScript: unknown } } }).dispatcher;
  const now = Date.now();
  dispatcher.transport.evalScript = (_script: unknown, keys: string[]) =>
    new Promise((resolve) =>
      setImmediate(() => {
        const reply: number[] = [now];
        for (let i = 0; i < keys.length / 2; i++) reply.push(0, 1_000, 5_000, 0, 0, 5_000);
        resolve(reply);
      }),
    );
  const service = new RateLimiterService(new RateLimitEngine(stack === 'bare RedisStore' ? redis : full), registry, { prefix: 'rl' });
  const policy = { algorithm: 'fixed-window' as const, limit: 1_000_000_000, window: 60_000 };
  let next = 0;
  const keys = Array.from({ length: KEYS }, (_, i) => `user${i}`);
  const run = async (until: number): Promise<number> => {
    let n = 0;
    const caller = async () => {
      while (Date.now() < until) {
        await service.consume(policy, keys[next++ % KEYS]);
        n++;
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, caller));
    return n;
  };
  await run(Date.now() + 1_000);
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const n = await run(Date.now() + ms);
  const cpu = process.cpuUsage(cpu0);
  const seconds = (performance.now() - t0) / 1000;
  process.stdout.write(`RESULT ${JSON.stringify({ n, us: (cpu.user + cpu.system) / n, perSec: n / seconds })}\n`);
  client.disconnect();
  process.exit(0);
}

function oneRun(port: number, stack: Stack, ms: number): Run {
  const out = spawnSync(
    process.execPath,
    [
      ...(process.env.BENCH_NODE_FLAGS ? process.env.BENCH_NODE_FLAGS.split(' ') : []),
      '--trace-gc-nvp',
      ...(__filename.endsWith('.ts') ? ['-r', 'ts-node/register/transpile-only'] : []),
      __filename,
      'worker',
      String(port),
      stack,
      String(ms),
    ],
    { encoding: 'utf8', env: { ...process.env, TS_NODE_SWC: 'true' }, maxBuffer: 64 * 1024 * 1024 },
  );
  const result = /RESULT (.*)/.exec(out.stdout);
  if (!result) throw new Error(`bench: a run failed: ${out.stderr.slice(0, 2_000)}`);
  const { us, perSec } = JSON.parse(result[1]) as { us: number; perSec: number };
  // The measured part is the last scavenges of the run (warm-up and module loading come first).
  const survived = [...out.stdout.matchAll(/gc=s .*?new_space_survived=(\d+)/g)].map((m) => Number(m[1])).slice(-20);
  return { usPerDecision: us, decisionsPerSec: perSec, survivedPerScavenge: median(survived) };
}

async function main(): Promise<void> {
  const runs = Number(process.env.BENCH_NODE_RUNS ?? 6);
  const ms = Number(process.env.BENCH_DECISION_MS ?? 1_500);
  const redis = await benchRedis();
  try {
    heading("Node's own cost of a decision (Redis replaced by a canned reply)", {
      runs: `${runs} per stack, each its own process`,
      ms,
      callers: CONCURRENCY,
      keys: KEYS,
      algorithm: 'fixed-window',
    });
    const rows: string[][] = [];
    for (const stack of STACKS) {
      const list: Run[] = [];
      for (let i = 0; i < runs; i++) list.push(oneRun(redis.port, stack, ms));
      for (const [i, r] of list.entries()) {
        rows.push([
          stack,
          String(i + 1),
          r.usPerDecision.toFixed(2),
          Math.round(r.decisionsPerSec).toLocaleString('en-US'),
          `${Math.round(r.survivedPerScavenge / 1024).toLocaleString('en-US')} KB`,
        ]);
      }
      rows.push([`**${stack}, median**`, '', `**${median(list.map((r) => r.usPerDecision)).toFixed(2)}**`, '', '']);
    }
    console.log(table(['stack', 'run', 'CPU µs per decision', 'decisions/s', 'kept per young collection'], rows));
  } finally {
    await redis.stop();
  }
}

if (process.argv[2] === 'worker') {
  void worker(Number(process.argv[3]), process.argv[4] as Stack, Number(process.argv[5]));
} else {
  main().catch((error) => {
    console.error(error);
    process.exit(1);
  });
}
