/**
 * `acquire()` bursts: 10,000 calls made in one event-loop turn on a spent quota. Prints how long they block
 * the event loop: from the first call until the last refusal is delivered (the synchronous loop of calls,
 * then the microtasks that answer the head and turn calls away), median of 5 runs after 3 warm-up bursts
 * (shown apart), with the calls that end up waiting, refused and admitted (which must not change). Also the process's CPU time over
 * the same turn, steadier than the wall clock on a box shared with other jobs. The memory rows spend a quota
 * of 1 per 10 s; the Redis row one of 1 per hour on a real redis-server this script starts (or
 * BENCH_REDIS_PORT's), with the default module and acquire options, and counts what is admitted until the
 * head's answer has come back from Redis. The last row is the queues alone (`RateLimitWaiters`, no service,
 * no store): their share of the first row.
 *
 *   TS_NODE_SWC=true node -r ts-node/register/transpile-only bench/acquire-burst.ts   (BENCH_ROUNDS)
 */
import { RateLimitAlgorithmRegistry } from '../lib/algorithms/algorithm.registry';
import type { RateLimitDecision } from '../lib/interfaces/decision.interface';
import type { RateLimitPolicy } from '../lib/interfaces/policy.interface';
import { RateLimitEngine } from '../lib/pipeline/rate-limit.engine';
import { RateLimiterService, type AcquireOptions } from '../lib/rate-limiter.service';
import type { AcquireTurn } from '../lib/service/acquire-turns';
import { paceOf, RateLimitWaiters } from '../lib/service/waiters';
import { MemoryStore } from '../lib/stores/memory/memory.store';
import { libraryClient } from '../test/support/redis-server';
import { serviceOver } from '../test/support/store-chain';
import { benchRedis, type BenchRedis } from './support/redis';
import { heading, median, table } from './support/report';

const CALLS = 10_000;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const KEY = 'partner-api';
/**
 * Bursts run and not counted before each row's. The first bursts of a process run before V8 has optimized
 * the calls' code (two to four times slower here); the warm-up column shows them.
 */
const WARM_UPS = 3;

const GCRA: RateLimitPolicy = { algorithm: 'gcra', limit: 1, window: '10s', name: 'partner' };
const FIXED: RateLimitPolicy = { algorithm: 'fixed-window', limit: 1, window: '10s', name: 'partner' };
const HOURLY: RateLimitPolicy = { algorithm: 'gcra', limit: 1, window: '1h', name: 'partner' };
const LONG = { maxWaitMs: 60_000, maxWaiters: CALLS };
/** How long the Redis row waits after a burst for the head's answer (and any admission) before counting. */
const REDIS_SETTLE_MS = 300;

/** What a burst calls: `acquire` on one key, and what is left waiting. */
interface Caller {
  acquire(options: AcquireOptions): Promise<unknown>;
  waiting(): number;
  shutdown(): void;
  close(): Promise<void>;
}

interface Scenario {
  name: string;
  caller: () => Promise<Caller>;
  options: AcquireOptions;
  /** A call already waits, its head told to retry in 10 s, before the burst (else the burst finds no queue). */
  headSleeping: boolean;
  /** ms to wait after the burst before counting what waits and what was admitted (a store's answer on its way). */
  settleMs?: number;
}

/** `RateLimiterService.acquire` on the memory store, the quota spent. */
async function service(policy: RateLimitPolicy): Promise<Caller> {
  const limiter = new RateLimiterService(new RateLimitEngine(new MemoryStore()), new RateLimitAlgorithmRegistry(), { prefix: 'bench' });
  await limiter.consume(policy, KEY);
  return callerOf(limiter, policy, async () => undefined);
}

/**
 * `RateLimiterService.acquire` on Redis, the module's default store stack over a connected client, the quota
 * (1 per hour) spent by one `consume` under a prefix of its own.
 */
async function redisService(redis: BenchRedis, run: number): Promise<Caller> {
  const client = await libraryClient(`redis://127.0.0.1:${redis.port}`);
  const { svc, store } = serviceOver({ redis: client, prefix: `bench-acq-${process.pid}-${run}` }, new RateLimitAlgorithmRegistry());
  if (!(await svc.consume(HOURLY, KEY)).allowed) throw new Error('the first consume of a fresh prefix was not allowed');
  return callerOf(svc, HOURLY, async () => {
    await store.close();
    client.disconnect();
  });
}

function callerOf(limiter: RateLimiterService, policy: RateLimitPolicy, close: () => Promise<void>): Caller {
  return {
    acquire: (options) => limiter.acquire(policy, KEY, options),
    waiting: () => limiter.waiting(policy, KEY),
    shutdown: () => limiter.beforeApplicationShutdown(),
    close,
  };
}

/** The queues alone (`RateLimitWaiters`), over a counter that always says "retry in 10 s": their share of a burst. */
async function queuesAlone(): Promise<Caller> {
  const waiters = new RateLimitWaiters();
  const pace = paceOf('gcra', 1, 10_000);
  const told = { allowed: false, policy: 'partner', limit: 1, remaining: 0, resetMs: 10_000, moreQuotaMs: 10_000, retryAfterMs: 10_000 };
  const take = async () => ({ decision: told as RateLimitDecision, giveBack: async () => undefined });
  const turn = (): AcquireTurn => ({ queueKey: KEY, key: KEY, policy: 'partner', cost: 1, pace, take });
  return {
    acquire: (options) => waiters.acquire(turn(), options),
    waiting: () => waiters.waiting(KEY),
    shutdown: () => waiters.shutdown(),
    close: async () => undefined,
  };
}

function scenarios(redis: BenchRedis): Scenario[] {
  let runs = 0;
  return [
    { name: 'gcra, defaults (maxWaiters 1,000)', caller: () => service(GCRA), options: {}, headSleeping: false },
    { name: 'gcra, defaults, a head already sleeping', caller: () => service(GCRA), options: {}, headSleeping: true },
    { name: 'fixed-window, defaults', caller: () => service(FIXED), options: {}, headSleeping: false },
    { name: 'gcra, maxWaitMs 60 s, maxWaiters 10,000', caller: () => service(GCRA), options: LONG, headSleeping: false },
    {
      name: 'gcra, maxWaitMs 60 s, maxWaiters 10,000, a head already sleeping',
      caller: () => service(GCRA),
      options: LONG,
      headSleeping: true,
    },
    {
      name: 'Redis, gcra 1 per hour, defaults',
      caller: () => redisService(redis, runs++),
      options: {},
      headSleeping: false,
      settleMs: REDIS_SETTLE_MS,
    },
    { name: 'the queues alone (no service, no store), defaults', caller: queuesAlone, options: {}, headSleeping: false },
  ];
}

interface Run {
  /** ms from the first call until the last refusal was delivered. */
  blockedMs: number;
  loopMs: number;
  /** CPU ms of this process (user + system, GC threads included) from the first call to the next macrotask. */
  cpuMs: number;
  waiting: number;
  refused: number;
  /** Calls of the burst granted by the time it was counted. */
  admitted: number;
}

const macrotask = () => new Promise<void>((resolve) => setImmediate(resolve));
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

async function burst({ caller: make, options, headSleeping, settleMs = 0 }: Scenario): Promise<Run> {
  const caller = await make();
  const pending: Array<Promise<unknown>> = [];
  if (headSleeping) {
    pending.push(caller.acquire({}).catch(() => undefined));
    await macrotask();
  }
  let refused = 0;
  let admitted = 0;
  let last = 0;
  const onAdmitted = () => void admitted++;
  const onRefused = () => {
    refused++;
    last = performance.now();
  };
  const cpu = process.cpuUsage();
  const start = performance.now();
  for (let i = 0; i < CALLS; i++) pending.push(caller.acquire(options).then(onAdmitted, onRefused));
  const loopMs = performance.now() - start;
  await macrotask();
  const { user, system } = process.cpuUsage(cpu);
  const blockedMs = last - start;
  const cpuMs = (user + system) / 1_000;
  if (settleMs > 0) await sleep(settleMs);
  const run = { blockedMs, loopMs, cpuMs, waiting: caller.waiting(), refused, admitted };
  caller.shutdown();
  await Promise.all(pending);
  await caller.close();
  return run;
}

async function main(): Promise<void> {
  const redis = await benchRedis();
  heading('acquire(): 10,000 calls in one turn on a spent quota (memory store, and Redis)', { calls: CALLS, rounds: ROUNDS });
  try {
    const rows: string[][] = [];
    for (const scenario of scenarios(redis)) {
      const warmUps: Run[] = [];
      for (let i = 0; i < WARM_UPS; i++) warmUps.push(await burst(scenario));
      const runs: Run[] = [];
      for (let round = 0; round < ROUNDS; round++) runs.push(await burst(scenario));
      const blocked = runs.map((r) => r.blockedMs);
      rows.push([
        scenario.name,
        `${runs[0].waiting} / ${runs[0].refused} / ${Math.max(...runs.map((r) => r.admitted))}`,
        median(runs.map((r) => r.loopMs)).toFixed(1),
        `**${median(blocked).toFixed(1)}** (${blocked.map((ms) => ms.toFixed(1)).join(' / ')})`,
        median(runs.map((r) => r.cpuMs)).toFixed(1),
        warmUps.map((r) => r.blockedMs.toFixed(0)).join(' / '),
      ]);
    }
    const header = [
      'burst',
      'waiting / refused / admitted (most of any run)',
      'loop of calls (ms, median)',
      'event loop blocked (ms, median (runs))',
      'CPU (ms, median)',
      'warm-up bursts, blocked (ms)',
    ];
    console.log(table(header, rows));
  } finally {
    await redis.stop();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
