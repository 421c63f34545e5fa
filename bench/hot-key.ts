/**
 * One hot key beyond one Redis core: 4 processes (each its own store and client, as 4 app instances) share
 * one global key, decided exactly (one Redis script per decision) or with quota slices (`slice`: one per
 * slice). Per mode: decisions/s summed over the processes with a limit never reached, Redis CPU per decision;
 * then admitted vs limit with the limit reached (20,000/s): for a token bucket, admitted ÷ what the limit allows
 * (`burst + rate × span`, the span from the first admission to the last on the store's clock), for a 1 s fixed
 * window, the most any window admitted ÷ limit (by the store's time of each decision).
 *
 *   npm run bench:hot-key        (BENCH_ROUNDS, BENCH_QUICK; see bench/support/settings.ts)
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { Redis } from 'ioredis';
import { type RateLimitModuleOptions, type RateLimitPolicy } from '../lib';
import { RateLimitAlgorithmRegistry } from '../lib/algorithms/algorithm.registry';
import { RateLimitEngine } from '../lib/pipeline/rate-limit.engine';
import { createStore } from '../lib/pipeline/create-store';
import { compilePolicy } from '../lib/policy/compile-policy';
import { trackerKeyPrefix } from '../lib/shared/keys';
import { readyThenGo } from '../test/support/worker-go';
import { benchRedis } from './support/redis';
import { fmtRate, fmtRatio, heading, median, table } from './support/report';
import { settings } from './support/settings';

const PROCESSES = 4;
/** Callers in flight per process. */
const CONCURRENCY = 64;
const SLICE = 50;
/** Limit of the overshoot rows: 4 × a slice of 50 is 1 % of it. */
const LIMIT = 20_000;

interface Job {
  port: number;
  policy: RateLimitPolicy;
  durationMs: number;
}

interface WorkerResult {
  decisions: number;
  admitted: number;
  /** Admissions by second of the store's clock (floor(nowMs / 1000)). */
  perSecond: Record<string, number>;
  /** The store's time of the first and the last admission, ms. */
  firstMs: number;
  lastMs: number;
  fallbacks: number;
}

/** Worker side: decides `job.policy` for one tracker in a closed loop of CONCURRENCY callers until the time is up. */
async function work(job: Job): Promise<void> {
  const registry = new RateLimitAlgorithmRegistry();
  const options: RateLimitModuleOptions = { redis: `redis://127.0.0.1:${job.port}`, storeTimeoutMs: 1_000 };
  const store = createStore(options, registry);
  await store.ready?.(5_000);
  const engine = new RateLimitEngine(store, options);
  const compiled = compilePolicy(job.policy, registry, 'bench', 'svc');
  const requests = [{ compiled, params: compiled.staticParams!, cost: 1 }];
  const tracker = trackerKeyPrefix('rl', 'whole-api');
  await engine.decide(trackerKeyPrefix('rl', 'warm'), requests, 'peek');
  await readyThenGo();
  const result: WorkerResult = { decisions: 0, admitted: 0, perSecond: {}, firstMs: Infinity, lastMs: -Infinity, fallbacks: 0 };
  const end = Date.now() + job.durationMs;
  const caller = async () => {
    while (Date.now() < end) {
      const answer = await engine.decide(tracker, requests, 'consume');
      result.decisions++;
      if (answer.decisions[0].reason === 'store-unavailable') result.fallbacks++;
      if (!answer.allowed) continue;
      result.admitted++;
      const nowMs = answer.nowMs as number;
      result.firstMs = Math.min(result.firstMs, nowMs);
      result.lastMs = Math.max(result.lastMs, nowMs);
      const second = Math.floor(nowMs / 1_000);
      result.perSecond[second] = (result.perSecond[second] ?? 0) + 1;
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, caller));
  process.stdout.write(`${JSON.stringify(result)}\n`);
  await store.close();
  process.exit(0);
}

/** Runs PROCESSES workers on `policy` at once; their results, and Redis's CPU seconds meanwhile. */
async function race(
  port: number,
  admin: Redis,
  policy: RateLimitPolicy,
  durationMs: number,
): Promise<{ results: WorkerResult[]; redisCpu: number }> {
  const job: Job = { port, policy, durationMs };
  const children: ChildProcess[] = [];
  const lines: Array<AsyncIterator<string>> = [];
  for (let i = 0; i < PROCESSES; i++) {
    const child = spawn(process.execPath, ['-r', 'ts-node/register/transpile-only', __filename, 'worker', JSON.stringify(job)], {
      env: { ...process.env, TS_NODE_SWC: 'true' },
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    children.push(child);
    lines.push(createInterface({ input: child.stdout! })[Symbol.asyncIterator]());
  }
  for (const line of lines) await nextJson(line); // ready
  const before = await redisCpu(admin);
  for (const child of children) child.stdin!.write('go\n');
  const results = await Promise.all(lines.map(async (line) => (await nextJson(line)) as WorkerResult));
  const redisCpuSeconds = (await redisCpu(admin)) - before;
  await Promise.all(children.map((c) => new Promise((resolve) => (c.exitCode !== null ? resolve(0) : c.once('exit', resolve)))));
  return { results, redisCpu: redisCpuSeconds };
}

/** A worker's next JSON line; the log lines the module writes to stdout (its startup line) are skipped. */
async function nextJson(line: AsyncIterator<string>): Promise<unknown> {
  for (;;) {
    const { value, done } = await line.next();
    if (done) throw new Error('hot-key: a worker ended without a result (its stderr is above)');
    if (value.startsWith('{')) return JSON.parse(value) as unknown;
  }
}

async function redisCpu(admin: Redis): Promise<number> {
  const info = await admin.info('cpu');
  const read = (field: string) => Number(new RegExp(`${field}:([\\d.]+)`).exec(info)?.[1] ?? NaN);
  return read('used_cpu_user') + read('used_cpu_sys');
}

const sum = (values: readonly number[]) => values.reduce((a, b) => a + b, 0);

async function main(): Promise<void> {
  const durationMs = settings.quick ? 1_500 : 3_000;
  heading('Hot key: 4 processes on one global key, exact vs sliced', {
    processes: PROCESSES,
    'callers per process': CONCURRENCY,
    slice: SLICE,
    rounds: settings.rounds,
    'seconds per cell': durationMs / 1_000,
  });
  const redis = await benchRedis();
  const admin = new Redis({ port: redis.port });
  const modes = [
    { name: 'exact', extra: {} },
    { name: `sliced (${SLICE})`, extra: { slice: SLICE } },
  ];
  const throughput: Record<string, number[]> = {};
  const redisUs: Record<string, number[]> = {};
  const overshoot: Record<string, { bucket: number[]; window: number[]; fallbacks: number }> = {};
  try {
    for (let round = 0; round < settings.rounds; round++) {
      for (const mode of modes) {
        await admin.flushall();
        // Never reached: every decision admits.
        const open: RateLimitPolicy = { algorithm: 'token-bucket', limit: 100_000_000, window: '1s', name: `open${round}`, ...mode.extra };
        const free = await race(redis.port, admin, open, durationMs);
        const decisions = sum(free.results.map((r) => r.decisions));
        (throughput[mode.name] ??= []).push(decisions / (durationMs / 1_000));
        (redisUs[mode.name] ??= []).push((free.redisCpu * 1e6) / decisions);

        const entry = (overshoot[mode.name] ??= { bucket: [], window: [], fallbacks: 0 });
        const bucket: RateLimitPolicy = { algorithm: 'token-bucket', limit: LIMIT, window: '1s', name: `tb${round}`, ...mode.extra };
        const tb = await race(redis.port, admin, bucket, durationMs);
        // The bucket starts full (burst = limit) and earns LIMIT per second: between the first admission and the
        // last (the store's times) it may admit burst + LIMIT × that span.
        const spanS = (Math.max(...tb.results.map((r) => r.lastMs)) - Math.min(...tb.results.map((r) => r.firstMs))) / 1_000;
        entry.bucket.push(sum(tb.results.map((r) => r.admitted)) / (LIMIT + LIMIT * spanS));

        const window: RateLimitPolicy = { algorithm: 'fixed-window', limit: LIMIT, window: '1s', name: `fw${round}`, ...mode.extra };
        const fw = await race(redis.port, admin, window, durationMs);
        const perSecond = new Map<string, number>();
        for (const r of fw.results) for (const [s, n] of Object.entries(r.perSecond)) perSecond.set(s, (perSecond.get(s) ?? 0) + n);
        entry.window.push(Math.max(...perSecond.values()) / LIMIT);
        entry.fallbacks += sum([...free.results, ...tb.results, ...fw.results].map((r) => r.fallbacks));
      }
    }
  } finally {
    admin.disconnect();
    await redis.stop();
  }
  const exact = modes[0].name;
  const pct = (v: number) => `${(v * 100).toFixed(3)} %`;
  console.log(
    table(
      [
        'mode',
        'decisions/s (median)',
        '× exact',
        'Redis CPU µs / decision',
        'token-bucket: admitted ÷ (burst + rate × span)',
        'fixed-window: most admitted in a window ÷ limit',
        'fallbacks',
      ],
      modes.map((m) => [
        m.name,
        fmtRate(median(throughput[m.name])),
        fmtRatio(median(throughput[m.name].map((t, i) => t / throughput[exact][i]))),
        median(redisUs[m.name]).toFixed(2),
        `${pct(median(overshoot[m.name].bucket))} (max ${pct(Math.max(...overshoot[m.name].bucket))})`,
        `${pct(median(overshoot[m.name].window))} (max ${pct(Math.max(...overshoot[m.name].window))})`,
        String(overshoot[m.name].fallbacks),
      ]),
    ),
  );
}

if (process.argv[2] === 'worker') void work(JSON.parse(process.argv[3]) as Job);
else
  main().catch((error) => {
    console.error(error);
    process.exit(1);
  });
