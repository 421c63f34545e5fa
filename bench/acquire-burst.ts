/**
 * `acquire()` bursts: 10,000 calls made in one event-loop turn on a spent quota (1 per 10 s), on the memory
 * store. Prints how long they block the event loop: from the first call until the last refusal is delivered
 * (the synchronous loop of calls, then the microtasks that answer the head and turn calls away), median of
 * 5 runs after a warm-up, with the calls that end up waiting and refused (which must not change). Also the
 * process's CPU time over the same turn, steadier than the wall clock on a box shared with other jobs. The
 * last row is the queues alone (`RateLimitWaiters`, no service, no store): their share of the first row.
 *
 *   TS_NODE_SWC=true node -r ts-node/register/transpile-only bench/acquire-burst.ts   (BENCH_ROUNDS)
 */
import { RateLimitAlgorithmRegistry } from '../lib/algorithms/algorithm.registry';
import type { RateLimitDecision } from '../lib/interfaces/decision.interface';
import type { RateLimitPolicy } from '../lib/interfaces/policy.interface';
import { RateLimitEngine } from '../lib/rate-limit.engine';
import { RateLimiterService, type AcquireOptions } from '../lib/rate-limiter.service';
import { paceOf, RateLimitWaiters, type AcquireTurn } from '../lib/service/waiters';
import { MemoryStore } from '../lib/stores/memory.store';
import { heading, median, table } from './support/report';

const CALLS = 10_000;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const KEY = 'partner-api';

const GCRA: RateLimitPolicy = { algorithm: 'gcra', limit: 1, window: '10s', name: 'partner' };
const FIXED: RateLimitPolicy = { algorithm: 'fixed-window', limit: 1, window: '10s', name: 'partner' };
const LONG = { maxWaitMs: 60_000, maxWaiters: CALLS };

/** What a burst calls: `acquire` on one key, and what is left waiting. */
interface Caller {
  acquire(options: AcquireOptions): Promise<unknown>;
  waiting(): number;
  shutdown(): void;
}

interface Scenario {
  name: string;
  caller: () => Promise<Caller>;
  options: AcquireOptions;
  /** A call already waits, its head told to retry in 10 s, before the burst (else the burst finds no queue). */
  headSleeping: boolean;
}

/** `RateLimiterService.acquire` on the memory store, the quota spent. */
async function service(policy: RateLimitPolicy): Promise<Caller> {
  const limiter = new RateLimiterService(new RateLimitEngine(new MemoryStore()), new RateLimitAlgorithmRegistry(), { prefix: 'bench' });
  await limiter.consume(policy, KEY);
  return {
    acquire: (options) => limiter.acquire(policy, KEY, options),
    waiting: () => limiter.waiting(policy, KEY),
    shutdown: () => limiter.beforeApplicationShutdown(),
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
  };
}

const SCENARIOS: Scenario[] = [
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
  { name: 'the queues alone (no service, no store), defaults', caller: queuesAlone, options: {}, headSleeping: false },
];

interface Run {
  /** ms from the first call until the last refusal was delivered. */
  blockedMs: number;
  loopMs: number;
  /** CPU ms of this process (user + system, GC threads included) from the first call to the next macrotask. */
  cpuMs: number;
  waiting: number;
  refused: number;
}

const macrotask = () => new Promise<void>((resolve) => setImmediate(resolve));

async function burst({ caller: make, options, headSleeping }: Scenario): Promise<Run> {
  const caller = await make();
  const pending: Array<Promise<unknown>> = [];
  if (headSleeping) {
    pending.push(caller.acquire({}).catch(() => undefined));
    await macrotask();
  }
  let refused = 0;
  let last = 0;
  const onRefused = () => {
    refused++;
    last = performance.now();
  };
  const cpu = process.cpuUsage();
  const start = performance.now();
  for (let i = 0; i < CALLS; i++) pending.push(caller.acquire(options).catch(onRefused));
  const loopMs = performance.now() - start;
  await macrotask();
  const { user, system } = process.cpuUsage(cpu);
  const run = { blockedMs: last - start, loopMs, cpuMs: (user + system) / 1_000, waiting: caller.waiting(), refused };
  caller.shutdown();
  await Promise.all(pending);
  return run;
}

async function main(): Promise<void> {
  heading('acquire(): 10,000 calls in one turn on a spent quota (memory store)', { calls: CALLS, rounds: ROUNDS });
  const rows: string[][] = [];
  for (const scenario of SCENARIOS) {
    await burst(scenario);
    const runs: Run[] = [];
    for (let round = 0; round < ROUNDS; round++) runs.push(await burst(scenario));
    const blocked = runs.map((r) => r.blockedMs);
    rows.push([
      scenario.name,
      `${runs[0].waiting} / ${runs[0].refused}`,
      median(runs.map((r) => r.loopMs)).toFixed(1),
      `**${median(blocked).toFixed(1)}** (${blocked.map((ms) => ms.toFixed(1)).join(' / ')})`,
      median(runs.map((r) => r.cpuMs)).toFixed(1),
    ]);
  }
  const header = ['burst', 'waiting / refused', 'loop of calls (ms, median)', 'event loop blocked (ms, median (runs))', 'CPU (ms, median)'];
  console.log(table(header, rows));
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
