/**
 * Decisions while this process stalls, and while the CPU is saturated, beside rate-limiter-flexible.
 *
 * Stalls: each round issues 6 decisions on a fresh key limited to 3 and 50 on distinct keys with room to
 * spare, blocks the event loop for 0 / 50 / 150 / 300 / 600 ms right after ioredis wrote the last of them
 * (Redis answers meanwhile; the replies wait in the socket), then awaits them and counts fallbacks
 * (`reason: 'store-unavailable'`), admissions on the limited key, errors, and whether the next decision
 * after the stall is Redis's. Medians over the rounds; the stall values run interleaved, round after round.
 *
 * Saturated CPU: two busy-looping child processes while 64 callers decide in a closed loop, interleaved with
 * the same cell on an idle CPU: decisions/s, fallbacks per 1,000, p99.
 *
 * Ours: `RateLimiterService` over the store the module builds, default options, `redis:` an ioredis client
 * as the README passes one (and the memory store, for reference). The peer: rate-limiter-flexible's
 * `RateLimiterRedis` as its README configures it (`storeClient`, `points`, `duration`).
 *
 *   npm run bench:stalls      (BENCH_ROUNDS, default 9; BENCH_QUICK)
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import { RateLimiterRedis } from 'rate-limiter-flexible';
import { RateLimitAlgorithmRegistry } from '../lib/algorithms/algorithm.registry';
import type { RateLimitDecision } from '../lib/interfaces/decision.interface';
import type { RateLimitModuleOptions } from '../lib/interfaces/module-options.interface';
import type { RateLimitPolicy } from '../lib/interfaces/policy.interface';
import { decisionKeyCount } from '../lib/stores/redis/redis-codec';
import type { RateLimitStore } from '../lib/stores/store.interface';
import { blockLoop } from '../test/support/stall';
import { serviceOver } from '../test/support/store-chain';
import { benchRedis, type BenchRedis } from './support/redis';
import { heading, median, percentileSorted, table } from './support/report';

const quick = process.env.BENCH_QUICK === '1';
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? (quick ? 3 : 9));
const STALLS_MS = [0, 50, 150, 300, 600];
/** The limited key: 6 decisions, 3 of which fit. A sliding log is exact, and has no window boundary to straddle. */
const LIMIT = 3;
const LIMITED_CALLS = 6;
const LIMITED: RateLimitPolicy = { algorithm: 'sliding-log', limit: LIMIT, window: '1m' };
/** Distinct keys with room to spare, as most of an app's traffic is. */
const SPREAD_CALLS = 50;
const GENEROUS_LIMIT = 1_000_000;
const GENEROUS: RateLimitPolicy = { algorithm: 'fixed-window', limit: GENEROUS_LIMIT, window: '1m' };
const PER_ROUND = LIMITED_CALLS + SPREAD_CALLS;
const CPU_HOGS = 2;
const CPU_CONCURRENCY = 64;
const CPU_KEYS = 10_000;
const CPU_CELL_MS = quick ? 1_000 : 3_000;
const CPU_ROUNDS = quick ? 1 : 3;

type Outcome = 'admitted' | 'rejected' | 'fallback-admitted' | 'fallback-rejected' | 'error';
type Command = Parameters<Redis['sendCommand']>[0];

/** One limiter as a user would hold it. */
interface Variant {
  name: string;
  /** Decisions a command ioredis writes carries (Redis variants: the stall waits for the last one's write). */
  weigh?: (command: Command) => number;
  limited(key: string): Promise<Outcome>;
  generous(key: string): Promise<Outcome>;
  /** Our Redis store's recent timings (absent on the memory store, and before the store-time deadlines). */
  store?: RateLimitStore;
}

const registry = new RateLimitAlgorithmRegistry();
/** Every store built here, closed at the end (closing one leaves the client, which is ours to close, open). */
const stores: RateLimitStore[] = [];

function outcomeOf(d: RateLimitDecision): Outcome {
  if (d.reason === 'store-unavailable') return d.allowed ? 'fallback-admitted' : 'fallback-rejected';
  return d.allowed ? 'admitted' : 'rejected';
}

/** Our script calls carry one decision per `decisionKeyCount(1)` keys (a batch carries many). */
const ourWeight = (c: Command) => (c.name === 'evalsha' || c.name === 'eval' ? Number(c.args[1]) / decisionKeyCount(1) : 0);
/** rate-limiter-flexible sends one script call (its `rlflxIncr` command) per consume. */
const rlfWeight = (c: Command) => (c.name === 'evalsha' || c.name === 'eval' ? 1 : 0);

function ours(name: string, options: RateLimitModuleOptions, redis: boolean): Variant {
  const { svc, store } = serviceOver(options, registry);
  stores.push(store);
  const decide = (policy: RateLimitPolicy, key: string) => svc.consume(policy, key).then(outcomeOf, () => 'error' as const);
  return {
    name,
    weigh: redis ? ourWeight : undefined,
    limited: (key) => decide(LIMITED, key),
    generous: (key) => decide(GENEROUS, key),
    store: redis ? store : undefined,
  };
}

function rlf(client: Redis): Variant {
  const limited = new RateLimiterRedis({ storeClient: client, points: LIMIT, duration: 60, keyPrefix: 'rlf-limited' });
  const generous = new RateLimiterRedis({ storeClient: client, points: GENEROUS_LIMIT, duration: 60 });
  // It rejects with a RateLimiterRes when limited, with an Error when Redis failed.
  const settle = (p: Promise<unknown>): Promise<Outcome> =>
    p.then(
      () => 'admitted',
      (e: unknown) => (e instanceof Error ? 'error' : 'rejected'),
    );
  return {
    name: 'rlf RateLimiterRedis',
    weigh: rlfWeight,
    limited: (key) => settle(limited.consume(key)),
    generous: (key) => settle(generous.consume(key)),
  };
}

/**
 * Blocks the loop for `ms` right after ioredis wrote the command that brings the decisions written since
 * this call to `decisions` (see test/support/stall.ts, which counts our one-policy decisions only). Once.
 */
function stallAfterWrites(decisions: number, ms: number, weigh: (c: Command) => number): { happened: () => boolean; restore(): void } {
  const original = Redis.prototype.sendCommand;
  let sent = 0;
  let happened = false;
  Redis.prototype.sendCommand = function (this: Redis, ...args: Parameters<Redis['sendCommand']>) {
    const result = original.apply(this, args);
    if (!happened) {
      sent += weigh(args[0]);
      if (sent >= decisions) {
        happened = true;
        blockLoop(ms);
      }
    }
    return result;
  } as Redis['sendCommand'];
  return { happened: () => happened, restore: () => void (Redis.prototype.sendCommand = original) };
}

/** One round of a stall cell. */
interface StallRound {
  fallbacks: number;
  errors: number;
  limitedAdmitted: number;
  nextFallback: boolean;
  /** Whether the loop was blocked after the write (undefined on the memory store: blocked after the calls). */
  stalled?: boolean;
}

async function stallRound(v: Variant, ms: number, tag: string): Promise<StallRound> {
  const stall = v.weigh ? stallAfterWrites(PER_ROUND, ms, v.weigh) : undefined;
  let limited: Outcome[];
  let spread: Outcome[];
  try {
    const pendingLimited = Array.from({ length: LIMITED_CALLS }, () => v.limited(`${tag}-limited`));
    const pendingSpread = Array.from({ length: SPREAD_CALLS }, (_, i) => v.generous(`${tag}-${i}`));
    // The memory store has decided already: block the loop with the answers made, as Redis's are.
    if (!stall) blockLoop(ms);
    [limited, spread] = await Promise.all([Promise.all(pendingLimited), Promise.all(pendingSpread)]);
  } finally {
    stall?.restore();
  }
  const all = [...limited, ...spread];
  const next = await v.generous(`${tag}-next`);
  return {
    fallbacks: all.filter((o) => o.startsWith('fallback')).length,
    errors: all.filter((o) => o === 'error').length,
    limitedAdmitted: limited.filter((o) => o === 'admitted' || o === 'fallback-admitted').length,
    nextFallback: next.startsWith('fallback'),
    stalled: stall?.happened(),
  };
}

/** One closed-loop cell: `concurrency` callers each awaiting a decision before the next, for `ms`. */
interface LoopCell {
  perSec: number;
  p99: number;
  fallbacks: number;
  errors: number;
  ops: number;
}

async function closedLoop(v: Variant, ms: number, tag: string): Promise<LoopCell> {
  const latencies: number[] = [];
  let fallbacks = 0;
  let errors = 0;
  let next = 0;
  const start = performance.now();
  const deadline = start + ms;
  const caller = async () => {
    while (performance.now() < deadline) {
      const key = `${tag}-${next++ % CPU_KEYS}`;
      const t0 = performance.now();
      const outcome = await v.generous(key);
      latencies.push(performance.now() - t0);
      if (outcome.startsWith('fallback')) fallbacks++;
      else if (outcome === 'error') errors++;
    }
  };
  await Promise.all(Array.from({ length: CPU_CONCURRENCY }, caller));
  const elapsed = performance.now() - start;
  return {
    perSec: (latencies.length * 1000) / elapsed,
    p99: percentileSorted(Float64Array.from(latencies).sort(), 99),
    fallbacks,
    errors,
    ops: latencies.length,
  };
}

/** Busy-looping child processes, killed by pid at the end (and on SIGINT or an exception). */
const hogs = new Set<ChildProcess>();

async function startHogs(): Promise<void> {
  for (let i = 0; i < CPU_HOGS; i++) hogs.add(spawn(process.execPath, ['-e', 'for(;;){}'], { stdio: 'ignore' }));
  // Node's own startup before they spin.
  await new Promise((r) => setTimeout(r, 300));
}

async function stopHogs(): Promise<void> {
  const exits = [...hogs].map((hog) => {
    const exited = hog.exitCode !== null || hog.signalCode !== null;
    const done = exited ? Promise.resolve() : new Promise<void>((resolve) => hog.once('exit', () => resolve()));
    if (!exited && hog.pid !== undefined) process.kill(hog.pid, 'SIGKILL');
    return done;
  });
  hogs.clear();
  await Promise.all(exits);
}

function killHogsNow(): void {
  for (const hog of hogs) if (hog.pid !== undefined && hog.exitCode === null && hog.signalCode === null) process.kill(hog.pid, 'SIGKILL');
}

const per1000 = (n: number, of: number) => (of === 0 ? NaN : (n * 1000) / of);
const fmt = (n: number, digits = 0) => (Number.isFinite(n) ? n.toFixed(digits) : 'n/a');
/** Median, and the range when the rounds differ. */
function spread(values: readonly number[], digits = 0): string {
  const lo = Math.min(...values);
  const hi = Math.max(...values);
  return lo === hi ? `**${fmt(lo, digits)}**` : `**${fmt(median(values), digits)}** (${fmt(lo, digits)}–${fmt(hi, digits)})`;
}

function timingsRow(name: string, store: RateLimitStore | undefined): string[] {
  const t = store?.timings?.();
  if (!t) return [name, 'n/a (no `timings()`)', 'n/a'];
  const three = (x: { p50: number; p99: number; max: number }) => `${fmt(x.p50, 1)} / ${fmt(x.p99, 1)} / ${fmt(x.max, 1)}`;
  return [name, three(t.storeLatencyMs), three(t.eventLoopDelayMs)];
}

/** A client connected before the first timed call. */
function connected(client: Redis): Promise<Redis> {
  if (client.status === 'ready') return Promise.resolve(client);
  return new Promise((resolve, reject) => {
    client.once('ready', () => resolve(client));
    setTimeout(() => reject(new Error('bench: a Redis client did not connect within 10 s')), 10_000).unref();
  });
}

async function stallCells(ourClient: Redis, rlfClient: Redis): Promise<void> {
  heading('Stalls: the event loop blocked right after the decisions were written', {
    rounds: ROUNDS,
    perRound: `${LIMITED_CALLS} on a key limited to ${LIMIT} + ${SPREAD_CALLS} on distinct keys`,
    loadavg: loadavg()
      .map((l) => l.toFixed(2))
      .join(' '),
  });
  // A fresh service per stall, so each cell's timings and circuits are its own.
  const cells = STALLS_MS.map((ms) => ({
    ms,
    variants: [ours('ours, Redis', { redis: ourClient }, true), ours('ours, memory', {}, false), rlf(rlfClient)],
    rounds: new Map<string, StallRound[]>(),
  }));
  // Warm-up: scripts loaded, code paths compiled.
  for (const cell of cells) for (const v of cell.variants) await stallRound(v, 0, `warm-${cell.ms}-${v.name}`);
  for (let round = 0; round < ROUNDS; round++) {
    for (const cell of cells) {
      for (const v of cell.variants) {
        const result = await stallRound(v, cell.ms, `r${round}-s${cell.ms}-${v.name}`);
        cell.rounds.set(v.name, [...(cell.rounds.get(v.name) ?? []), result]);
        await new Promise((r) => setTimeout(r, 20));
      }
    }
    process.stderr.write(`stalls: round ${round + 1}/${ROUNDS} done\n`);
  }
  const rows: string[][] = [];
  for (const cell of cells) {
    for (const v of cell.variants) {
      const rs = cell.rounds.get(v.name)!;
      rows.push([
        cell.ms === 0 ? '0 (control)' : `${cell.ms} ms`,
        v.name,
        spread(rs.map((r) => per1000(r.fallbacks, PER_ROUND))),
        spread(rs.map((r) => r.limitedAdmitted)),
        spread(rs.map((r) => Math.max(0, r.limitedAdmitted - LIMIT))),
        spread(rs.map((r) => per1000(r.errors, PER_ROUND))),
        `${rs.filter((r) => r.nextFallback).length} / ${rs.length}`,
        v.weigh ? `${rs.filter((r) => r.stalled).length} / ${rs.length}` : 'n/a',
      ]);
    }
  }
  console.log(
    table(
      [
        'stall',
        'limiter',
        'fallbacks per 1,000',
        `admitted of ${LIMITED_CALLS} (limit ${LIMIT})`,
        'over-admissions',
        'errors per 1,000',
        'next decision a fallback',
        'rounds stalled after the write',
      ],
      rows,
    ),
  );
  console.log('\n_Medians over the rounds (range in parentheses when they differ)._\n');
  console.log(
    table(
      ['stall', 'our Redis store: store latency p50 / p99 / max (ms)', 'event-loop delay p50 / p99 / max (ms)'],
      cells.map((cell) => timingsRow(`${cell.ms} ms`, cell.variants[0].store)),
    ),
  );
}

async function cpuCells(ourClient: Redis, rlfClient: Redis): Promise<void> {
  heading('Saturated CPU: busy-looping processes beside the bench', {
    hogs: CPU_HOGS,
    concurrency: CPU_CONCURRENCY,
    keys: CPU_KEYS,
    cellMs: CPU_CELL_MS,
    rounds: CPU_ROUNDS,
    loadavg: loadavg()
      .map((l) => l.toFixed(2))
      .join(' '),
  });
  const conditions = ['idle', 'saturated'] as const;
  const make = () => [ours('ours, Redis', { redis: ourClient }, true), ours('ours, memory', {}, false), rlf(rlfClient)];
  const variants = { idle: make(), saturated: make() };
  const results = new Map<string, LoopCell[]>();
  for (const v of variants.idle) {
    await closedLoop(v, 200, `cpu-warm-${v.name}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  for (let round = 0; round < CPU_ROUNDS; round++) {
    for (const condition of conditions) {
      if (condition === 'saturated') await startHogs();
      try {
        for (const v of variants[condition]) {
          const key = `${condition}|${v.name}`;
          results.set(key, [...(results.get(key) ?? []), await closedLoop(v, CPU_CELL_MS, `cpu-r${round}-${condition}-${v.name}`)]);
          // The memory store's loop never yields: let our Redis store's ticker stop first, or it records that as a stall.
          await new Promise((r) => setTimeout(r, 50));
        }
      } finally {
        if (condition === 'saturated') await stopHogs();
      }
    }
    process.stderr.write(`cpu: round ${round + 1}/${CPU_ROUNDS} done\n`);
  }
  const rows = variants.idle.map((v) => {
    const idle = results.get(`idle|${v.name}`)!;
    const busy = results.get(`saturated|${v.name}`)!;
    return [
      v.name,
      spread(idle.map((c) => c.perSec)),
      spread(busy.map((c) => c.perSec)),
      spread(
        busy.map((c, i) => c.perSec / idle[i].perSec),
        2,
      ),
      spread(
        busy.map((c) => per1000(c.fallbacks, c.ops)),
        1,
      ),
      spread(
        busy.map((c) => per1000(c.errors, c.ops)),
        1,
      ),
      `${spread(
        idle.map((c) => c.p99),
        1,
      )} / ${spread(
        busy.map((c) => c.p99),
        1,
      )}`,
    ];
  });
  console.log(
    table(
      [
        'limiter',
        'decisions/s idle',
        'decisions/s saturated',
        'saturated ÷ idle (same round)',
        'fallbacks per 1,000 (saturated)',
        'errors per 1,000 (saturated)',
        'p99 ms idle / saturated',
      ],
      rows,
    ),
  );
  console.log('\n_Medians over the rounds (range in parentheses when they differ)._\n');
  console.log(
    table(
      ['condition', 'our Redis store: store latency p50 / p99 / max (ms)', 'event-loop delay p50 / p99 / max (ms)'],
      conditions.map((c) => timingsRow(c, variants[c][0].store)),
    ),
  );
}

async function main(): Promise<void> {
  let redis: BenchRedis | undefined;
  const clients: Redis[] = [];
  process.once('SIGINT', () => {
    killHogsNow();
    void (redis?.stop() ?? Promise.resolve()).finally(() => process.exit(130));
  });
  process.once('exit', killHogsNow);
  try {
    redis = await benchRedis();
    // As each README creates its client: ours `new Redis(url)`, rate-limiter-flexible without the offline queue.
    const ourClient = await connected(new Redis(`redis://127.0.0.1:${redis.port}`));
    const rlfClient = await connected(new Redis({ port: redis.port, enableOfflineQueue: false }));
    clients.push(ourClient, rlfClient);
    await stallCells(ourClient, rlfClient);
    await cpuCells(ourClient, rlfClient);
  } finally {
    await stopHogs();
    for (const store of stores) await store.close();
    for (const c of clients) c.disconnect();
    await redis?.stop();
  }
}

main().catch((error) => {
  killHogsNow();
  console.error(error);
  process.exit(1);
});
