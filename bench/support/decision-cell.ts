/**
 * One cell of bench/decisions.ts: `concurrency` callers in a closed loop for a fixed time, every decision
 * timed, with the Node process's CPU and the Redis servers' CPU (and command time) around it.
 */
import { performance } from 'node:perf_hooks';
import type { Redis } from 'ioredis';
import type { RateLimitDecision } from '../../lib';
import { percentileSorted } from './report';

/** One decision for a tracker; what it resolves with is only checked for fallbacks. */
export type Decide = (key: string) => Promise<unknown>;

export interface Cell {
  ops: number;
  perSec: number;
  p50: number;
  p99: number;
  /** CPU time per decision, µs: this Node process, and the Redis servers (INFO cpu). Steadier than rates. */
  nodeCpuUs: number;
  redisCpuUs: number;
  /** Redis's own command time per decision, µs (INFO commandstats: the scripts, without I/O). */
  redisCmdUs: number;
}

/** What the Redis servers of a cell have spent so far: CPU seconds and command µs, summed over the masters. */
async function redisUsage(admins: readonly Redis[]): Promise<{ cpuSeconds: number; commandUs: number }> {
  let cpuSeconds = 0;
  let commandUs = 0;
  for (const admin of admins) {
    const info = String(await admin.info('cpu')) + String(await admin.info('commandstats'));
    const read = (field: string) => Number(new RegExp(`${field}:([\\d.]+)`).exec(info)?.[1] ?? NaN);
    cpuSeconds += read('used_cpu_user') + read('used_cpu_sys');
    for (const match of info.matchAll(/,usec=(\d+),/g)) commandUs += Number(match[1]);
  }
  return { cpuSeconds, commandUs };
}

/** Decisions answered by the store-error fallback instead of Redis (should stay 0: they would flatter us). */
let fallbacks = 0;

export function fallbackCount(): number {
  return fallbacks;
}

/**
 * Counted in the timed loop for every variant alike (a promise of our own per decision would tax ours
 * only): a decision, a `consumeAll` result, or anything else (a peer's answer, never a fallback).
 */
function countFallback(answer: unknown): void {
  const decisions = (answer as { decisions?: Array<Partial<RateLimitDecision>> } | undefined)?.decisions;
  if (decisions) {
    for (const decision of decisions) if (decision.reason === 'store-unavailable') fallbacks++;
  } else if ((answer as Partial<RateLimitDecision> | undefined)?.reason === 'store-unavailable') fallbacks++;
}

/**
 * `concurrency` callers in a closed loop for `ms`, each awaiting one decision for the key `pick()` gives it
 * before starting the next; every decision timed. Rejections are answers, not errors.
 */
export async function runCell(
  admins: readonly Redis[],
  decide: Decide,
  pick: () => string,
  concurrency: number,
  ms: number,
): Promise<Cell> {
  const latencies: number[] = [];
  let deadline = Infinity;
  const caller = async () => {
    while (performance.now() < deadline) {
      const key = pick();
      const t0 = performance.now();
      countFallback(await decide(key));
      latencies.push(performance.now() - t0);
    }
  };
  const cpu0 = process.cpuUsage();
  const redis0 = await redisUsage(admins);
  const start = performance.now();
  deadline = start + ms;
  await Promise.all(Array.from({ length: concurrency }, caller));
  const elapsed = performance.now() - start;
  const cpu = process.cpuUsage(cpu0);
  const redis1 = await redisUsage(admins);
  const ops = latencies.length;
  const sorted = Float64Array.from(latencies).sort();
  return {
    ops,
    perSec: (ops * 1000) / elapsed,
    p50: percentileSorted(sorted, 50),
    p99: percentileSorted(sorted, 99),
    nodeCpuUs: (cpu.user + cpu.system) / ops,
    redisCpuUs: ((redis1.cpuSeconds - redis0.cpuSeconds) * 1e6) / ops,
    redisCmdUs: (redis1.commandUs - redis0.commandUs) / ops,
  };
}

/** Keys in turn from `keys`, starting at `start`: the same walk for every variant of a cell. */
export function walk(keys: readonly string[], start = 0): () => string {
  let next = start;
  return () => keys[next++ % keys.length];
}
